defmodule Grove.World.Game.Tally do
  @moduledoc false
  # A game's world-wide numbers (`{:tally, board, key, delta}` effects): a
  # leaderboard, for instance. Zones cast what their effects added here;
  # this process adds it up, writes it to the store behind the store's
  # bounded queue (one `save_state/4` a second at most, for everything that
  # changed), and keeps each board's best (the top) in an ETS table that
  # `GET /game/board` reads without a message.
  #
  # In a cluster every node's tally writes its own share of each total,
  # under `KEY@NODE`, and reads the others' from the store: totals are the
  # sum of the shares, so no two nodes ever write the same row, and nothing
  # is lost when one is. A board is loaded from the store the first time
  # it is touched or read, and read again every ten seconds for the other
  # nodes' shares.
  #
  # Keys are account ids (integers; shown by the account's name, looked up
  # once and every minute after) or strings (shown as they are).

  use GenServer

  alias Grove.World
  alias Grove.World.Game.Storage
  alias Grove.World.Stats

  require Logger

  @write_every 1000
  @reread_every 10_000
  @names_every 60_000
  @top 10

  defstruct [:world, :store, :table, boards: %{}, mine: %{}, dirty: %{}, names: %{}, timer: nil]

  def start_link(world_name),
    do: GenServer.start_link(__MODULE__, world_name, name: name(world_name))

  def child_spec(world_name) do
    %{id: __MODULE__, start: {__MODULE__, :start_link, [world_name]}, shutdown: 10_000}
  end

  @doc "The registered name of a world's tally."
  def name(world_name), do: :"#{world_name}.tally"

  @doc "Adds a zone's tallies (a cast: a zone never waits)."
  def add(tally, tallies), do: GenServer.cast(tally, {:tallies, tallies})

  @doc """
  The best `n` of a board (at most #{@top}), read from ETS: `[%{"name" =>
  name, "score" => total}]`, best first; `[]` for a board never touched.
  The first read of a board asks the tally to load it.
  """
  def top(tally, board, n) do
    case :ets.whereis(tally) do
      :undefined ->
        []

      table ->
        case :ets.lookup(table, {:top, board}) do
          [{_, top}] ->
            Enum.take(top, n)

          [] ->
            GenServer.cast(tally, {:load, board})
            []
        end
    end
  end

  @doc false
  # Writes what waits, and computes the tops, now (tests and tools).
  def flush(tally), do: GenServer.call(tally, :flush, :infinity)

  @impl true
  def init(world_name) do
    Process.flag(:trap_exit, true)
    world = World.fetch!(world_name)
    table = :ets.new(name(world_name), [:named_table, :protected, read_concurrency: true])
    state = %__MODULE__{world: world_name, store: world.store, table: table}
    Process.send_after(self(), :reread, @reread_every)
    Process.send_after(self(), :names, @names_every)
    {:ok, state}
  end

  @impl true
  def handle_cast({:tallies, tallies}, state) do
    state =
      Enum.reduce(tallies, state, fn {board, key, delta}, state ->
        state = load(state, board)
        mine = Map.update(state.mine, {board, key}, delta, &(&1 + delta))

        boards =
          Map.update!(state.boards, board, fn totals ->
            Map.update(totals, key, delta, &(&1 + delta))
          end)

        %{state | mine: mine, boards: boards, dirty: Map.put(state.dirty, {board, key}, true)}
      end)

    {:noreply, state |> tops(Enum.uniq(for {board, _, _} <- tallies, do: board)) |> later()}
  end

  def handle_cast({:load, board}, state), do: {:noreply, state |> load(board) |> tops([board])}

  @impl true
  def handle_call(:flush, _from, state) do
    state = write(state)
    {:reply, :ok, tops(state, Map.keys(state.boards))}
  end

  @impl true
  def handle_info(:write, state), do: {:noreply, write(%{state | timer: nil})}

  # The other nodes' shares, as they have written them.
  def handle_info(:reread, state) do
    Process.send_after(self(), :reread, @reread_every)
    boards = Map.keys(state.boards)
    state = Enum.reduce(boards, %{state | boards: %{}}, &load(&2, &1))
    {:noreply, tops(state, boards)}
  end

  def handle_info(:names, state) do
    Process.send_after(self(), :names, @names_every)
    {:noreply, tops(%{state | names: %{}}, Map.keys(state.boards))}
  end

  def handle_info({:EXIT, _from, reason}, state), do: {:stop, reason, state}

  @impl true
  def terminate(_reason, state), do: write(state)

  defp later(%__MODULE__{timer: nil} = state),
    do: %{state | timer: Process.send_after(self(), :write, @write_every)}

  defp later(state), do: state

  # A board's totals, from every node's shares in the store; this node's
  # own shares as written, plus what it added since and has not written.
  defp load(%__MODULE__{boards: boards} = state, board) when is_map_key(boards, board), do: state

  defp load(state, board) do
    here = "@" <> Atom.to_string(node())

    case Storage.list_state(state.store, scope(state, board)) do
      {:ok, rows} ->
        shares =
          for {row, value} <- rows,
              {key, at} = split(row),
              key != nil,
              do: {key, at, :erlang.binary_to_term(value)}

        written_here = for {key, at, n} <- shares, at == here, into: %{}, do: {key, n}
        # What this node added and has not written yet counts on top.
        pending =
          for {{^board, key}, true} <- state.dirty,
              into: %{},
              do: {key, state.mine[{board, key}] - Map.get(written_here, key, 0)}

        mine =
          Enum.reduce(written_here, state.mine, fn {key, n}, mine ->
            if Map.has_key?(state.dirty, {board, key}),
              do: mine,
              else: Map.put(mine, {board, key}, n)
          end)

        totals =
          Enum.reduce(shares, pending, fn {key, _at, n}, totals ->
            Map.update(totals, key, n, &(&1 + n))
          end)

        %{state | boards: Map.put(state.boards, board, totals), mine: mine}

      {:error, _} ->
        Logger.warning("game: the store could not give the #{board} tally; counting from here")
        %{state | boards: Map.put(state.boards, board, %{})}
    end
  end

  defp write(%__MODULE__{dirty: dirty} = state) when map_size(dirty) == 0, do: state

  defp write(state) do
    world = World.fetch!(state.world)
    here = Atom.to_string(node())

    by_board = Enum.group_by(Map.keys(state.dirty), &elem(&1, 0), &elem(&1, 1))

    Enum.reduce(by_board, state, fn {board, keys}, state ->
      entries =
        for key <- keys,
            do: {"#{key_string(key)}@#{here}", :erlang.term_to_binary(state.mine[{board, key}])}

      case Storage.save_state(state.store, scope(state, board), entries) do
        :ok ->
          Stats.incr(world.stats, :tallies_written, length(entries))
          %{state | dirty: Map.drop(state.dirty, for(key <- keys, do: {board, key}))}

        {:error, _} ->
          Stats.incr(world.stats, :game_save_failures)
          later(state)
      end
    end)
  end

  # The best of each board, with names, for readers.
  defp tops(state, boards) do
    Enum.reduce(boards, state, fn board, state ->
      best =
        state.boards
        |> Map.get(board, %{})
        |> Enum.sort_by(fn {key, total} -> {-total, key_string(key)} end)
        |> Enum.take(@top)

      state = Enum.reduce(best, state, fn {key, _}, state -> named(state, key) end)
      top = for {key, total} <- best, do: %{"name" => state.names[key], "score" => total}
      :ets.insert(state.table, {{:top, board}, top})
      state
    end)
  end

  defp named(%__MODULE__{names: names} = state, key) when is_map_key(names, key), do: state
  defp named(state, key) when is_binary(key), do: %{state | names: Map.put(state.names, key, key)}

  defp named(state, id) when is_integer(id) do
    name =
      case Storage.fetch_account(state.store, id) do
        {:ok, %{name: name}} when is_binary(name) -> name
        {:ok, %{avatar: avatar}} -> "#{avatar} player #{id}"
        _ -> "player #{id}"
      end

    %{state | names: Map.put(state.names, id, name)}
  end

  defp scope(state, board),
    do: "tally/" <> World.Game.save_scope(World.fetch!(state.world)) <> "/#{board}"

  defp key_string(key) when is_integer(key), do: "i:#{key}"
  defp key_string(key) when is_binary(key), do: "s:" <> key

  # `KEY@NAME@HOST`: a node's name has one "@", a key may have any.
  defp split(row) do
    case row |> String.split("@") |> Enum.split(-2) do
      {key_parts, [name, host]} when key_parts != [] ->
        at = "@" <> name <> "@" <> host

        case Enum.join(key_parts, "@") do
          "i:" <> id -> {String.to_integer(id), at}
          "s:" <> key -> {key, at}
          _ -> {nil, nil}
        end

      _ ->
        {nil, nil}
    end
  end
end
