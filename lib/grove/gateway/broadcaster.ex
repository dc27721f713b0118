defmodule Grove.Gateway.Broadcaster do
  @moduledoc false
  # Sends what every client gets alike, `stats` each second and `density`
  # (the minimap) every few, encoded once per encoding and fanned out to the
  # sessions. Sessions that are behind drop them. The minimap is the largest
  # thing every client gets, so its size and pace are capped, and a fan-out to
  # many sessions is spread over half the interval, in slices of at least
  # @slice_min sessions every @slice_ms, so that ten thousand sockets are not
  # all written in the same millisecond and moves queued behind them do not
  # wait.

  use GenServer

  alias Grove.{Protocol, World}

  defstruct [:config, :last_moves, :last_at]

  @slice_ms 100
  @slice_min 500

  def start_link(config), do: GenServer.start_link(__MODULE__, config)

  @impl true
  def init(config) do
    Process.send_after(self(), :stats, config.stats_interval)
    Process.send_after(self(), :density, config.density_interval)
    {:ok, %__MODULE__{config: config, last_moves: moves(config.world), last_at: now()}}
  end

  @impl true
  def handle_info(:stats, state) do
    Process.send_after(self(), :stats, state.config.stats_interval)
    stats = World.stats(state.config.world)
    moves = moves(state.config.world, stats)
    at = now()
    per_second = div((moves - state.last_moves) * 1000, max(at - state.last_at, 1))

    broadcast(state.config, state.config.stats_interval, %{
      type: :stats,
      players: stats.players,
      actors: stats.actors,
      entities: stats.entities,
      moves_per_s: max(per_second, 0)
    })

    {:noreply, %{state | last_moves: moves, last_at: at}}
  end

  def handle_info(:density, state) do
    Process.send_after(self(), :density, state.config.density_interval)

    %{cols: cols, rows: rows, cells: cells} =
      World.density(state.config.world, state.config.density_side)

    broadcast(state.config, state.config.density_interval, %{
      type: :density,
      cols: cols,
      rows: rows,
      cells: cells
    })

    {:noreply, state}
  end

  def handle_info({:deliver, frames, sessions}, state) do
    deliver(frames, sessions)
    {:noreply, state}
  end

  defp broadcast(config, interval, message) do
    case :pg.get_members(config.scope, :sessions) do
      [] ->
        :ok

      sessions ->
        frames = %{
          json: {:text, IO.iodata_to_binary(Protocol.encode(message, :json))},
          binary: {:binary, IO.iodata_to_binary(Protocol.encode(message, :binary))}
        }

        slices = max(div(interval, 2 * @slice_ms), 1)
        size = max(div(length(sessions) + slices - 1, slices), @slice_min)
        [now | later] = Enum.chunk_every(sessions, size)
        deliver(frames, now)

        later
        |> Enum.with_index(1)
        |> Enum.each(fn {slice, i} ->
          Process.send_after(self(), {:deliver, frames, slice}, i * @slice_ms)
        end)
    end
  end

  defp deliver(frames, sessions) do
    for pid <- sessions, do: send(pid, {:grove_broadcast, frames})
    :ok
  end

  defp moves(world, stats \\ nil) do
    stats = stats || World.stats(world)

    Enum.reduce([:moves_ok, :blocked, :occupied, :out_of_bounds, :rate_limited, :busy], 0, fn key,
                                                                                              acc ->
      acc + stats[key]
    end)
  end

  defp now, do: System.monotonic_time(:millisecond)
end
