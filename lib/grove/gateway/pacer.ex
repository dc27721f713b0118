defmodule Grove.Gateway.Pacer do
  @moduledoc false
  # How often a player who does not move is sent views, set by how busy the
  # server is. Each view write costs a wake-up and a system call per player,
  # so under load the gateway trades view rate for capacity before latency
  # suffers: while the schedulers are less than `pace_low` busy, views go
  # out every `view_ms`; past `pace_high`, every `view_ms_max`; in between,
  # in proportion. A player who moves gets the views due with each outcome
  # whatever the pace. The pace lives in an `:atomics` the connections read
  # when they schedule their next view; this process measures the
  # schedulers once a second and sets it. When a player's views are due
  # without an outcome to carry them is `views_due/5`.
  #
  # The world's ticks are paced by the same measure (Grove.World.pace_ticks/2):
  # every `:tick` below `pace_low`, every `:tick_max` past `pace_high`. A
  # player gets views once a second at most past `pace_high`, so a zone's
  # deltas, up to ten a second, were read several at once by each viewer.

  use GenServer

  require Logger

  @every_ms 1000

  @doc "An `:atomics` holding the pace, starting at `view_ms`."
  @spec new(pos_integer()) :: :atomics.atomics_ref()
  def new(view_ms) do
    pace = :atomics.new(1, signed: false)
    :atomics.put(pace, 1, view_ms)
    pace
  end

  @doc "The view interval now, in milliseconds."
  @spec interval(:atomics.atomics_ref()) :: pos_integer()
  def interval(pace), do: :atomics.get(pace, 1)

  @doc """
  The interval for a scheduler utilization (0.0 to 1.0).

      iex> Grove.Gateway.Pacer.pace(0.3, {250, 1000}, {0.5, 0.8})
      250
      iex> Grove.Gateway.Pacer.pace(0.65, {250, 1000}, {0.5, 0.8})
      625
      iex> Grove.Gateway.Pacer.pace(0.95, {250, 1000}, {0.5, 0.8})
      1000
  """
  @spec pace(float(), {pos_integer(), pos_integer()}, {float(), float()}) :: pos_integer()
  def pace(utilization, {fastest, slowest}, {low, high}) do
    cond do
      utilization <= low -> fastest
      utilization >= high -> slowest
      true -> round(fastest + (slowest - fastest) * (utilization - low) / (high - low))
    end
  end

  @doc """
  When a connection's views are due without an outcome to carry them: at
  `view_at` (its last write of views and the interval), unless the player
  moves. A player who moves gets its views with each outcome, so a
  wake-up of its own for them is a turn and a write more a move:

    * while a move waits for its outcome (sent at `awaiting_since`, ms),
      the views wait for it too, up to `lost_move_ms` after it was sent,
      when a move whose zone died is settled;
    * a player whose last move (`moved_at`, ms) is less than
      `view_ms_max` old is given `view_wait_ms` past `view_at` for its
      next one, whose outcome carries them: moves about an interval apart
      would otherwise race it, and every other view go out alone.

  A player who has not moved for `view_ms_max` gets them at `view_at`.

      iex> limits = %{view_ms_max: 1000, view_wait_ms: 250, lost_move_ms: 2000}
      iex> Grove.Gateway.Pacer.views_due(5000, nil, nil, 4500, limits)
      5000
      iex> Grove.Gateway.Pacer.views_due(5000, nil, 4000, 4500, limits)
      5250
      iex> Grove.Gateway.Pacer.views_due(5000, nil, 3000, 4500, limits)
      5000
      iex> Grove.Gateway.Pacer.views_due(5000, 4990, 4990, 4995, limits)
      6991
  """
  @spec views_due(integer(), integer() | nil, integer() | nil, integer(), %{
          view_ms_max: pos_integer(),
          view_wait_ms: non_neg_integer(),
          lost_move_ms: pos_integer()
        }) :: integer()
  def views_due(view_at, nil, nil, _now, _limits), do: view_at

  def views_due(view_at, nil, moved_at, now, limits) do
    if views_wait?(nil, moved_at, now, limits),
      do: view_at + limits.view_wait_ms,
      else: view_at
  end

  # A millisecond past `lost_move_ms`: the move is lost only once it is
  # older than that, to the microsecond.
  def views_due(view_at, awaiting_since, _moved_at, _now, limits),
    do: max(view_at, awaiting_since + limits.lost_move_ms + 1)

  @doc """
  Whether a player's views wait for an outcome now: a move of its awaits
  its outcome (`awaiting_since` not nil), or it moved less than
  `view_ms_max` ago. The rule `views_due/5` times the views by, and the
  one a connection holds a moving player's snapshots and closings by.

      iex> limits = %{view_ms_max: 1000}
      iex> Grove.Gateway.Pacer.views_wait?(4990, 4990, 9000, limits)
      true
      iex> Grove.Gateway.Pacer.views_wait?(nil, 4000, 4500, limits)
      true
      iex> Grove.Gateway.Pacer.views_wait?(nil, 3000, 4500, limits)
      false
      iex> Grove.Gateway.Pacer.views_wait?(nil, nil, 4500, limits)
      false
  """
  @spec views_wait?(integer() | nil, integer() | nil, integer(), %{view_ms_max: pos_integer()}) ::
          boolean()
  def views_wait?(nil, nil, _now, _limits), do: false
  def views_wait?(nil, moved_at, now, limits), do: now - moved_at < limits.view_ms_max
  def views_wait?(_awaiting_since, _moved_at, _now, _limits), do: true

  def start_link(config), do: GenServer.start_link(__MODULE__, config)

  # The paces outlive this process (the world's, the world itself): one
  # that starts, again after a crash, or stops, with the gateway, sets them
  # back to the base until it measures, so that no zone's ticks, nor any
  # view, stay stretched by a measure nobody takes any more.
  @impl true
  def init(config) do
    Process.flag(:trap_exit, true)
    reset(config)
    :erlang.system_flag(:scheduler_wall_time, true)
    Process.send_after(self(), :measure, @every_ms)
    {:ok, {config, wall_time()}}
  end

  @impl true
  def terminate(_reason, {config, _before}), do: reset(config)

  defp reset(config) do
    :atomics.put(config.view_pace, 1, config.view_ms)
    :ok = Grove.World.pace_ticks(config.world, 0.0)
  end

  @impl true
  def handle_info(:measure, {config, before}) do
    Process.send_after(self(), :measure, @every_ms)
    now = wall_time()

    utilization = utilization(before, now)
    limits = {config.pace_low, config.pace_high}

    interval = pace(utilization, {config.view_ms, config.view_ms_max}, limits)
    :atomics.put(config.view_pace, 1, interval)
    :ok = Grove.World.pace_ticks(config.world, busy(utilization, limits))
    {:noreply, {config, now}}
  end

  @doc """
  How far a scheduler utilization is between `low` (0.0) and `high` (1.0).

      iex> Grove.Gateway.Pacer.busy(0.3, {0.5, 0.8})
      0.0
      iex> Grove.Gateway.Pacer.busy(0.5, {0.25, 0.75})
      0.5
      iex> Grove.Gateway.Pacer.busy(0.95, {0.5, 0.8})
      1.0
  """
  @spec busy(float(), {float(), float()}) :: float()
  def busy(utilization, {low, high}) do
    cond do
      utilization <= low -> 0.0
      utilization >= high -> 1.0
      true -> (utilization - low) / (high - low)
    end
  end

  # Busy share of the normal schedulers between two readings.
  defp utilization(before, now) do
    {busy, total} =
      Enum.zip_reduce(before, now, {0, 0}, fn {id, a0, t0}, {id, a1, t1}, {busy, total} ->
        {busy + a1 - a0, total + t1 - t0}
      end)

    if total > 0, do: busy / total, else: 0.0
  end

  defp wall_time do
    normal = :erlang.system_info(:schedulers)

    :erlang.statistics(:scheduler_wall_time)
    |> Enum.filter(fn {id, _, _} -> id <= normal end)
    |> Enum.sort()
  end
end
