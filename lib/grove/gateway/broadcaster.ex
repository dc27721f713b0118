defmodule Grove.Gateway.Broadcaster do
  @moduledoc false
  # What every client gets alike, `stats` every `stats_interval` and
  # `density` (the minimap; with `colonies`, its layer of bacteria, where
  # the world has them) every `density_interval`, encoded once per
  # encoding (JSON's as objects, before version 5 of the protocol, and as
  # arrays, from it on) as finished frames and posted on the gateway's bulletin: an ETS
  # table and a version number per item. Nobody is sent a message. Each
  # connection checks the versions whenever it writes (at least once per
  # view interval) and adds what is new to that write, so a broadcast costs
  # no wake-up and no system call of its own, and reaches ten thousand
  # players spread over one view interval by itself. A newly connected
  # player gets the latest density with its first write, and `stats`
  # posted after it joined (`joined/2`): those before do not count it.
  #
  # In a cluster both are the whole world's: each node's counts and
  # minimap cover the zones it runs, so the broadcaster of every node asks
  # the others for theirs (`Grove.World.node_stats/2`, `total_density/4`),
  # once per interval, whatever the number of players; a member that does
  # not answer within @ask_timeout is left out of that round.

  use GenServer

  alias Grove.Gateway.Frames
  alias Grove.World
  alias Grove.World.Counts

  defstruct [:config, :last_moves, :last_at, soon: false]

  @items [stats: 1, density: 2, announcement: 3]
  @ask_timeout 1000
  # After a join, fresh stats come this soon: joins in between wait for the same.
  @soon_ms 100
  @kept_announcements 8

  @typedoc "Where broadcasts are posted: the table (owned by the gateway) and the versions."
  @type bulletin :: %{table: :ets.tid(), versions: :atomics.atomics_ref()}

  @typedoc """
  The versions a connection has sent: `{stats, density, announcement}`,
  the last `nil` before its first read.
  """
  @type seen :: {non_neg_integer(), non_neg_integer(), non_neg_integer() | nil}

  @doc "A bulletin; created by the gateway, so that it outlives this process."
  @spec bulletin() :: bulletin()
  def bulletin do
    %{
      table: :ets.new(:grove_bulletin, [:set, :public, read_concurrency: true]),
      versions: :atomics.new(length(@items), signed: false)
    }
  end

  @doc """
  The frames posted since `seen`, in one encoding, and the versions they
  bring the reader to; without the minimap (`density`, with `colonies`, or
  `places`) for a reader that asked not to be sent it (`minimap` false).
  """
  @spec news(bulletin(), seen(), Frames.bulletin_encoding(), boolean()) :: {seen(), [binary()]}
  def news(bulletin, seen, encoding, minimap \\ true)

  def news(%{versions: versions} = bulletin, {stats_seen, _density_seen, told}, encoding, false),
    do: news(bulletin, {stats_seen, :atomics.get(versions, 2), told}, encoding, true)

  def news(
        %{versions: versions} = bulletin,
        {stats_seen, density_seen, told} = seen,
        encoding,
        true
      ) do
    stats = :atomics.get(versions, 1)
    density = :atomics.get(versions, 2)
    announced = :atomics.get(versions, 3)

    if stats == stats_seen and density == density_seen and announced == told do
      {seen, []}
    else
      frames =
        if(stats != stats_seen, do: [frame(bulletin, :stats, encoding)], else: []) ++
          if(density != density_seen, do: [frame(bulletin, :density, encoding)], else: []) ++
          announcements(bulletin, told, announced, encoding)

      {{stats, density, announced}, frames}
    end
  end

  @doc """
  A player joined: the `stats` posted so far do not count it, so its
  connection skips them (the versions it has seen, returned), and fresh
  ones are posted soon.
  """
  @spec joined(bulletin(), seen()) :: seen()
  def joined(%{versions: versions}, {_stats_seen, density_seen, told}) do
    GenServer.cast(__MODULE__, :stats_soon)
    {:atomics.get(versions, 1), density_seen, told}
  end

  @doc """
  Posts an announcement to every connection of this gateway: each gets it
  with its next write (within a view interval).
  """
  @spec announce(bulletin(), String.t()) :: :ok
  def announce(%{table: table, versions: versions}, text) do
    message = %{type: :announcement, text: text}
    # Numbered and written before the version says it is there.
    n = :ets.update_counter(table, :announcements, 1, {:announcements, 0})

    :ets.insert(table, {{:announcement, n}, encoded(message)})

    :ets.delete(table, {:announcement, n - @kept_announcements})
    raise_to(versions, 3, n)
  end

  # Two announcements posted at once: the version ends at the later one.
  defp raise_to(versions, index, n) do
    current = :atomics.get(versions, index)

    cond do
      current >= n -> :ok
      :atomics.compare_exchange(versions, index, current, n) == :ok -> :ok
      true -> raise_to(versions, index, n)
    end
  end

  # A new connection is told nothing said before it came.
  defp announcements(_bulletin, nil, _announced, _encoding), do: []
  defp announcements(_bulletin, told, told, _encoding), do: []

  defp announcements(bulletin, told, announced, encoding) do
    for n <- max(told + 1, announced - @kept_announcements + 1)..announced//1,
        [{_key, frames}] <- [:ets.lookup(bulletin.table, {:announcement, n})],
        do: Map.fetch!(frames, encoding)
  end

  defp frame(bulletin, item, encoding),
    do: Map.fetch!(:ets.lookup_element(bulletin.table, item, 2), encoding)

  # A message as a frame in each of the forms connections read it in.
  defp encoded(message),
    do: %{
      json: Frames.message(message, :json, 4),
      json_arrays: Frames.message(message, :json, 5),
      binary: Frames.message(message, :binary)
    }

  # One gateway a node, so one broadcaster, by name.
  def start_link(config), do: GenServer.start_link(__MODULE__, config, name: __MODULE__)

  @impl true
  def init(config) do
    send(self(), :stats)
    send(self(), :density)
    {:ok, %__MODULE__{config: config, last_moves: %{}, last_at: now()}}
  end

  @impl true
  def handle_cast(:stats_soon, %__MODULE__{soon: true} = state), do: {:noreply, state}

  def handle_cast(:stats_soon, state) do
    Process.send_after(self(), :stats_soon, @soon_ms)
    {:noreply, %{state | soon: true}}
  end

  @impl true
  def handle_info(:stats, state) do
    Process.send_after(self(), :stats, state.config.stats_interval)
    {:noreply, post_stats(state)}
  end

  def handle_info(:stats_soon, state), do: {:noreply, post_stats(%{state | soon: false})}

  def handle_info(:density, state) do
    Process.send_after(self(), :density, state.config.density_interval)
    post_density(state)
    {:noreply, state}
  end

  defp post_stats(state) do
    by_node = World.node_stats(state.config.world, @ask_timeout)
    stats = Counts.sum(Map.values(by_node))
    moves = Map.new(by_node, fn {node, stats} -> {node, moves(stats)} end)
    at = now()

    # Per node, over the nodes read both times: a member that joins or
    # leaves does not count its whole history as this interval's.
    moved =
      for {node, count} <- moves, is_map_key(state.last_moves, node), reduce: 0 do
        acc -> acc + max(count - state.last_moves[node], 0)
      end

    per_second = div(moved * 1000, max(at - state.last_at, 1))

    post(state.config.bulletin, :stats, %{
      type: :stats,
      players: max(stats.players, 0),
      actors: max(stats.actors, 0),
      entities: max(stats.entities, 0),
      moves_per_s: per_second
    })

    %{state | last_moves: moves, last_at: at}
  end

  defp post_density(state) do
    %World{grid: grid} = World.fetch!(state.config.world)

    if max(grid.zones_x, grid.zones_y) > state.config.minimap_zones,
      do: post_places(state, grid.zone_size),
      else: post_picture(state)
  end

  # A world too large to picture whole: its busiest zones, drawn by each
  # client around its player.
  defp post_places(state, zone_size) do
    # A zone's entities are sent as u16: past 65,535, a minimap's heat tells no more.
    places =
      for {col, row, count} <-
            World.total_places(state.config.world, state.config.minimap_places, @ask_timeout),
          do: {col, row, min(count, 65_535)}

    post(state.config.bulletin, :density, %{type: :places, zone_size: zone_size, places: places})
  end

  defp post_picture(state) do
    %{cols: cols, rows: rows, cells: cells} =
      World.total_density(state.config.world, state.config.density_side, :entities, @ask_timeout)

    density = %{type: :density, cols: cols, rows: rows, cells: cells}

    # Bacteria ride with the density, as a layer of their own, in the same write.
    messages =
      if World.fetch!(state.config.world).life do
        %{cols: cols, rows: rows, cells: cells} =
          World.total_density(
            state.config.world,
            state.config.density_side,
            :bacteria,
            @ask_timeout
          )

        [density, %{type: :colonies, cols: cols, rows: rows, cells: cells}]
      else
        [density]
      end

    post(state.config.bulletin, :density, messages)
  end

  defp post(bulletin, item, messages) do
    messages = List.wrap(messages)

    frames = Enum.map(messages, &encoded/1)

    :ets.insert(
      bulletin.table,
      {item, Map.new([:json, :json_arrays, :binary], &{&1, Enum.map(frames, fn f -> f[&1] end)})}
    )

    :atomics.add(bulletin.versions, Keyword.fetch!(@items, item), 1)
  end

  defp moves(stats),
    do: Enum.reduce([:moves_ok | World.rejections()], 0, fn key, acc -> acc + stats[key] end)

  defp now, do: System.monotonic_time(:millisecond)
end
