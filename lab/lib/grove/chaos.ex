defmodule Grove.Chaos do
  @moduledoc """
  Faults injected into a running instance, and what the chaos lab reads
  back to judge how it took them (`mix grove.chaos`, which loads this
  module into the server's node and calls it there over distributed
  Erlang: the product ships without it).

  Each fault kills a process the way a bug or a bad day would (`:kill`,
  which no process can trap), so that what is tested is the supervision
  and recovery, not a polite stop:

    * `:zone` - a random zone of the world; its supervisor starts it again
      and it recovers its entities and viewers from the tables the world
      keeps outside it;
    * `:session` - a random player's connection (its socket closes with
      it, with no goodbye);
    * `:broadcaster` - the gateway's broadcaster of stats and the minimap;
    * `:saver` - the accounts' writer of positions.

  Stalling the store is done from outside (a lock held on its database),
  so it is not here.
  """

  alias Grove.World

  @type fault :: :zone | :session | :broadcaster | :saver

  @faults [:zone, :session, :broadcaster, :saver]

  @doc "The kinds of fault `inject/3` knows."
  @spec faults() :: [fault()]
  def faults, do: @faults

  @doc """
  Injects one fault into the instance `name`, choosing its victim with
  `seed` (an integer, so that a run can be replayed). Returns what was
  killed, or `{:skipped, why}` when there was nothing to kill.
  """
  @spec inject(atom(), fault(), integer()) :: {:ok, String.t()} | {:skipped, String.t()}
  def inject(name \\ Grove, fault, seed) when fault in @faults do
    :rand.seed(:exsss, seed)
    victim(name, fault) |> kill()
  end

  defp victim(name, :zone) do
    world = World.fetch!(Grove.world(name))
    index = :rand.uniform(tuple_size(world.zones)) - 1
    {"zone #{index}", World.zone_pid(world, index)}
  end

  defp victim(_name, :session) do
    case Grove.Gateway.sessions() do
      [] -> {"a session", nil}
      sessions -> {"a session", Enum.random(sessions)}
    end
  end

  defp victim(_name, :broadcaster), do: {"the broadcaster", Grove.Gateway.broadcaster()}

  defp victim(name, :saver) do
    accounts = Grove.Accounts.fetch!(:"#{name}.Accounts")
    {"the saver", Process.whereis(accounts.saver)}
  end

  defp kill({what, nil}), do: {:skipped, "#{what}: none running"}

  defp kill({what, pid}) do
    Process.exit(pid, :kill)
    {:ok, "#{what} (#{inspect(pid)})"}
  end

  @doc """
  The cells of these entities as the world has them now (`nil` for one
  that is not in the world), read from its tables without a message.
  """
  @spec positions(atom(), [World.Entity.id()]) :: %{World.Entity.id() => World.Grid.cell() | nil}
  def positions(name \\ Grove, ids),
    do: Map.new(ids, fn id -> {id, World.position(Grove.world(name), id)} end)

  @doc """
  The world's audit (`Grove.World.audit/2`): every entity once, nobody
  stacked or on a blocked cell. It asks the zones one after another, so it
  is only exact in a world that stands still: `quiesce/1` first.
  """
  @spec audit(atom()) :: :ok | {:error, [String.t()]}
  def audit(name \\ Grove), do: World.audit(Grove.world(name), 60_000)

  @doc "Stops the instance's actors from moving (for an exact audit)."
  @spec quiesce(atom()) :: :ok
  def quiesce(name \\ Grove), do: Grove.Actors.pause(Grove.actors(name))

  @doc "Where the instance will place an account's player when it joins: its last position kept."
  @spec last_position(atom(), pos_integer()) ::
          {:ok, World.Grid.cell()} | {:error, :not_found | :unavailable}
  def last_position(name \\ Grove, account_id),
    do: Grove.Accounts.last_position(:"#{name}.Accounts", account_id)

  @doc "Who stands on `cell` now: an entity id, or `nil`."
  @spec occupant(atom(), World.Grid.cell()) :: World.Entity.id() | nil
  def occupant(name \\ Grove, {x, y}) do
    world = World.fetch!(Grove.world(name))
    table = elem(world.tables, World.Grid.zone_of(world.grid, x, y))

    case :ets.match(table, {:"$1", x, y, :_, :_, :_, :_, :_, :_, :_, :_, :_}) do
      [[id] | _] -> id
      [] -> nil
    end
  end
end
