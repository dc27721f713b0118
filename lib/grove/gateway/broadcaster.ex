defmodule Grove.Gateway.Broadcaster do
  @moduledoc false
  # What every client gets alike, `stats` every `stats_interval` and
  # `density` (the minimap; with `colonies`, its layer of bacteria, where
  # the world has them) every `density_interval`, encoded once per
  # encoding as finished frames and posted on the gateway's bulletin: an ETS
  # table and a version number per item. Nobody is sent a message. Each
  # connection checks the versions whenever it writes (at least once per
  # view interval) and adds what is new to that write, so a broadcast costs
  # no wake-up and no system call of its own, and reaches ten thousand
  # players spread over one view interval by itself. A newly connected
  # player gets the latest of each with its first write.

  use GenServer

  alias Grove.Gateway.Frames
  alias Grove.World

  defstruct [:config, :last_moves, :last_at]

  @items [stats: 1, density: 2]

  @typedoc "Where broadcasts are posted: the table (owned by the gateway) and the versions."
  @type bulletin :: %{table: :ets.tid(), versions: :atomics.atomics_ref()}

  @typedoc "The versions a connection has sent: `{stats, density}`."
  @type seen :: {non_neg_integer(), non_neg_integer()}

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
  bring the reader to.
  """
  @spec news(bulletin(), seen(), Grove.Protocol.encoding()) :: {seen(), [binary()]}
  def news(%{versions: versions} = bulletin, {stats_seen, density_seen} = seen, encoding) do
    stats = :atomics.get(versions, 1)
    density = :atomics.get(versions, 2)

    if stats == stats_seen and density == density_seen do
      {seen, []}
    else
      frames =
        if(stats != stats_seen, do: [frame(bulletin, :stats, encoding)], else: []) ++
          if density != density_seen, do: [frame(bulletin, :density, encoding)], else: []

      {{stats, density}, frames}
    end
  end

  defp frame(bulletin, item, :json), do: :ets.lookup_element(bulletin.table, item, 2)
  defp frame(bulletin, item, :binary), do: :ets.lookup_element(bulletin.table, item, 3)

  def start_link(config), do: GenServer.start_link(__MODULE__, config)

  @impl true
  def init(config) do
    send(self(), :stats)
    send(self(), :density)
    {:ok, %__MODULE__{config: config, last_moves: moves(config.world), last_at: now()}}
  end

  @impl true
  def handle_info(:stats, state) do
    Process.send_after(self(), :stats, state.config.stats_interval)
    stats = World.stats(state.config.world)
    moves = moves(state.config.world, stats)
    at = now()
    per_second = div((moves - state.last_moves) * 1000, max(at - state.last_at, 1))

    post(state.config.bulletin, :stats, %{
      type: :stats,
      players: max(stats.players, 0),
      actors: max(stats.actors, 0),
      entities: max(stats.entities, 0),
      moves_per_s: max(per_second, 0)
    })

    {:noreply, %{state | last_moves: moves, last_at: at}}
  end

  def handle_info(:density, state) do
    Process.send_after(self(), :density, state.config.density_interval)

    %{cols: cols, rows: rows, cells: cells} =
      World.density(state.config.world, state.config.density_side)

    density = %{type: :density, cols: cols, rows: rows, cells: cells}

    # Bacteria ride with the density, as a layer of their own, in the same write.
    messages =
      if World.fetch!(state.config.world).life do
        %{cols: cols, rows: rows, cells: cells} =
          World.density(state.config.world, state.config.density_side, :bacteria)

        [density, %{type: :colonies, cols: cols, rows: rows, cells: cells}]
      else
        [density]
      end

    post(state.config.bulletin, :density, messages)
    {:noreply, state}
  end

  defp post(bulletin, item, messages) do
    messages = List.wrap(messages)

    :ets.insert(
      bulletin.table,
      {item, Enum.map(messages, &Frames.message(&1, :json)),
       Enum.map(messages, &Frames.message(&1, :binary))}
    )

    :atomics.add(bulletin.versions, Keyword.fetch!(@items, item), 1)
  end

  defp moves(world, stats \\ nil) do
    stats = stats || World.stats(world)
    Enum.reduce([:moves_ok | World.rejections()], 0, fn key, acc -> acc + stats[key] end)
  end

  defp now, do: System.monotonic_time(:millisecond)
end
