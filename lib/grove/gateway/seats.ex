defmodule Grove.Gateway.Seats do
  @moduledoc false
  # The gateway's `:max_sessions`, kept exactly: one atomic, the seats
  # taken. An upgrade takes a seat before it starts its connection, with a
  # compare-and-swap that never takes one past the limit, so however many
  # upgrades run at once, no more connections than `:max_sessions` exist
  # (or are being started) at any instant.
  #
  # A seat is given back by this process, the seats' keeper, which
  # monitors every connection started with one: the upgrade hands it the
  # connection (`hold/2`) as soon as it has started, and its seat comes
  # back when the connection is gone, however it went (a crash, a kill, an
  # exit signal: a `terminate/2` runs for none of these). An upgrade that
  # started no connection gives its seat back itself. One monitor and two
  # messages to the keeper a connection, none on a player's moves.
  #
  # A session counted once its connection had the socket (as the
  # `sessions` gauge still is) made the limit approximate: every upgrade
  # in flight passed the check against the same count, and a join storm
  # took hundreds of players past it.

  use GenServer

  @type t :: :atomics.atomics_ref()

  @doc "No seat taken; made once by the gateway."
  @spec new() :: t()
  def new, do: :atomics.new(1, signed: true)

  @doc """
  The seats' keeper. It comes before the connections and the server in the
  gateway's tree, so that when it starts, none is left: every seat is free.
  """
  @spec start_link({t(), atom()}) :: GenServer.on_start()
  def start_link({seats, name}), do: GenServer.start_link(__MODULE__, seats, name: name)

  @doc "Takes a seat if fewer than `max` are taken."
  @spec take(t(), non_neg_integer()) :: :ok | :full
  def take(seats, max), do: take(seats, max, taken(seats))

  defp take(seats, max, seen) do
    case attempt(seats, max, seen) do
      {:changed, now} -> take(seats, max, now)
      taken_or_full -> taken_or_full
    end
  end

  @doc false
  # One step of `take/2`, having seen `seen` seats taken: `:full`, or a
  # compare-and-swap from what it saw, which fails if another took or gave
  # back one meanwhile (`{:changed, now}`: look again). Apart so that its
  # tests can interleave the steps of takers at once.
  @spec attempt(t(), non_neg_integer(), integer()) :: :ok | :full | {:changed, integer()}
  def attempt(_seats, max, seen) when seen >= max, do: :full

  def attempt(seats, _max, seen) do
    case :atomics.compare_exchange(seats, 1, seen, seen + 1) do
      :ok -> :ok
      now -> {:changed, now}
    end
  end

  @doc """
  Hands the seat taken for the connection `pid` to the keeper, who gives
  it back when `pid` is gone (at once if it is gone already).
  """
  @spec hold(GenServer.server(), pid()) :: :ok
  def hold(keeper, pid), do: GenServer.cast(keeper, {:hold, pid})

  @doc "Gives a seat back (one taken by an upgrade that started no connection)."
  @spec give_back(t()) :: :ok
  def give_back(seats), do: :atomics.sub(seats, 1, 1)

  @doc "The seats taken."
  @spec taken(t()) :: integer()
  def taken(seats), do: :atomics.get(seats, 1)

  # Callbacks

  @impl true
  def init(seats) do
    :atomics.put(seats, 1, 0)
    {:ok, seats}
  end

  @impl true
  def handle_cast({:hold, pid}, seats) do
    Process.monitor(pid)
    {:noreply, seats}
  end

  @impl true
  def handle_info({:DOWN, _ref, :process, _pid, _reason}, seats) do
    give_back(seats)
    {:noreply, seats}
  end
end
