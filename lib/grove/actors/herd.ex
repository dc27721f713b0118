defmodule Grove.Actors.Herd do
  @moduledoc false
  # One process that walks many actors. Each actor is an entity of its own,
  # joined and moved through the public client API with its own schedule;
  # the herd only shares the process, the timer and the mailbox between them.
  #
  # Why not one process per actor: a move then costs two wake-ups of a cold
  # process (its timer, then its outcome), and at hundreds of thousands of
  # actors that, not the world, is what the machine spends its time on. See
  # docs/decisions.md for the measurement.
  #
  # Schedules live on a timing wheel of `resolution` ms slots keyed by
  # absolute slot number; the herd's single timer fires at the next slot that
  # has someone due, offset by a phase of its own so that herds do not all
  # fire at once. The moves due in a slot go out together with
  # `move_many/2` (one message per zone), unless `batch: false`. The tag of
  # every move is the time it was sent, so the outcome alone gives the round
  # trip.

  use GenServer

  alias Grove.Actors.Stats
  alias Grove.World.Grid

  require Logger

  @join_attempts 10
  @blob_attempts 20
  @directions List.to_tuple(Grid.directions())

  defstruct [
    :world,
    :api,
    :stats,
    :count,
    :interval,
    :jitter,
    :spawn,
    :kind,
    :area,
    :resolution,
    :phase,
    :batch,
    :rand,
    :timer,
    :native_per_us,
    walkers: [],
    wheel: %{},
    slot: 0,
    paused: false
  ]

  @type t :: %__MODULE__{}

  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @doc "Stops sending moves (outcomes still count), so a bench can drain."
  @spec pause(pid()) :: :ok
  def pause(herd), do: GenServer.call(herd, :pause, :infinity)

  # Callbacks

  @impl true
  def init(opts) do
    herd = %__MODULE__{
      world: Keyword.fetch!(opts, :world),
      api: Keyword.get(opts, :api, Grove.World),
      stats: Keyword.fetch!(opts, :stats),
      count: Keyword.fetch!(opts, :count),
      interval: Keyword.get(opts, :interval, 1000),
      jitter: Keyword.get(opts, :jitter, 0.2),
      spawn: Keyword.get(opts, :spawn, :uniform),
      kind: Keyword.get(opts, :kind, :actor),
      area: Keyword.get(opts, :area),
      resolution: Keyword.get(opts, :resolution, 100),
      batch: Keyword.get(opts, :batch, true),
      rand: :rand.seed_s(:exsss),
      native_per_us: :erlang.convert_time_unit(1, :microsecond, :native)
    }

    {phase, rand} = :rand.uniform_s(herd.resolution, herd.rand)
    {:ok, %{herd | phase: phase - 1, rand: rand}, {:continue, :join}}
  end

  @impl true
  def handle_continue(:join, herd) do
    {walkers, herd} = join_all(herd, herd.count, [])
    now_slot = current_slot(herd)
    interval_slots = interval_slots(herd)

    # First moves are spread evenly over one interval, so a herd started all
    # at once does not move all at once.
    {wheel, rand} =
      Enum.reduce(walkers, {%{}, herd.rand}, fn id, {wheel, rand} ->
        {offset, rand} = :rand.uniform_s(interval_slots, rand)
        {add(wheel, now_slot + offset, id), rand}
      end)

    herd = %{herd | walkers: walkers, wheel: wheel, slot: now_slot, rand: rand}
    {:noreply, schedule(herd)}
  end

  @impl true
  def handle_info({:grove_moves, outcomes}, herd) do
    now = :erlang.monotonic_time()

    for {_id, sent_at, outcome} <- outcomes do
      Stats.outcome(herd.stats, outcome_key(outcome), div(now - sent_at, herd.native_per_us))
    end

    {:noreply, herd}
  end

  def handle_info({:grove_move, _id, sent_at, outcome}, herd) do
    micros = div(:erlang.monotonic_time() - sent_at, herd.native_per_us)
    Stats.outcome(herd.stats, outcome_key(outcome), micros)
    {:noreply, herd}
  end

  def handle_info(:beat, %__MODULE__{paused: true} = herd), do: {:noreply, %{herd | timer: nil}}

  def handle_info(:beat, herd) do
    now_slot = current_slot(herd)
    herd = Enum.reduce((herd.slot + 1)..now_slot//1, herd, &walk_slot(&2, &1, now_slot))
    {:noreply, schedule(%{herd | slot: max(now_slot, herd.slot), timer: nil})}
  end

  # Herds walk actors that do not watch; a view message could only come
  # from an actor kind that joined with views on, and is not for the herd.
  def handle_info(message, herd) when elem(message, 0) == :grove_view, do: {:noreply, herd}

  @impl true
  def handle_call(:pause, _from, herd) do
    if herd.timer, do: Process.cancel_timer(herd.timer)
    {:reply, :ok, %{herd | paused: true, timer: nil}}
  end

  ## Walking

  defp walk_slot(herd, slot, now_slot) do
    case Map.pop(herd.wheel, slot) do
      {nil, _wheel} ->
        herd

      {due, wheel} ->
        interval_slots = interval_slots(herd)
        jitter_slots = round(interval_slots * herd.jitter)
        sent_at = :erlang.monotonic_time()

        {moves, wheel, rand} =
          Enum.reduce(due, {[], wheel, herd.rand}, fn id, {moves, wheel, rand} ->
            # One draw gives both the direction and the next wait.
            {draw, rand} = :rand.uniform_s(8 * (2 * jitter_slots + 1), rand)
            direction = rem(draw - 1, 8) + 1
            offset = div(draw - 1, 8) + 1
            # Counted from when the move was due, not from when the herd got
            # to it, so a herd running late keeps its actors' pace.
            next = max(slot + interval_slots - jitter_slots + offset - 1, now_slot + 1)

            {[{id, elem(@directions, direction - 1), sent_at} | moves], add(wheel, next, id),
             rand}
          end)

        send_moves(herd, moves)
        Stats.incr(herd.stats, :sent, length(due))
        %{herd | wheel: wheel, rand: rand}
    end
  end

  defp send_moves(%__MODULE__{batch: true} = herd, moves),
    do: herd.api.move_many(herd.world, moves)

  defp send_moves(herd, moves) do
    for {id, direction, sent_at} <- moves, do: herd.api.move(herd.world, id, direction, sent_at)
  end

  defp add(wheel, slot, id) do
    case wheel do
      %{^slot => ids} -> %{wheel | slot => [id | ids]}
      _ -> Map.put(wheel, slot, [id])
    end
  end

  defp schedule(%__MODULE__{wheel: wheel} = herd) when map_size(wheel) == 0, do: herd

  defp schedule(herd) do
    next = next_due(herd.wheel, herd.slot + 1, herd.slot + 2 * interval_slots(herd) + 2)
    at = next * herd.resolution + herd.phase
    %{herd | timer: Process.send_after(self(), :beat, at, abs: true)}
  end

  defp next_due(wheel, slot, last) when slot < last do
    if is_map_key(wheel, slot), do: slot, else: next_due(wheel, slot + 1, last)
  end

  defp next_due(wheel, _slot, _last), do: wheel |> Map.keys() |> Enum.min()

  defp current_slot(herd),
    do: div(System.monotonic_time(:millisecond) - herd.phase, herd.resolution)

  defp interval_slots(herd), do: max(div(herd.interval, herd.resolution), 1)

  defp outcome_key({:ok, _cell}), do: :ok
  defp outcome_key({:rejected, reason}), do: reason

  ## Joining

  defp join_all(herd, 0, walkers), do: {walkers, herd}

  defp join_all(herd, left, walkers) do
    {result, herd} = join_one(herd, @join_attempts)

    case result do
      {:ok, id, _cell} ->
        Stats.incr(herd.stats, :joined)
        join_all(herd, left - 1, [id | walkers])

      {:error, reason} ->
        # Counted for whoever watches; one log line per herd is enough to say why.
        if Stats.read(herd.stats).counts.join_failed == 0,
          do: Logger.warning("an actor could not join: #{inspect(reason)}")

        Stats.incr(herd.stats, :join_failed)
        join_all(herd, left - 1, walkers)
    end
  end

  defp join_one(herd, attempts) do
    {at, herd} = start_cell(herd)

    case herd.api.join(herd.world, at: at, updates: :none, kind: herd.kind) do
      {:error, reason} when reason in [:busy, :timeout, :occupied, :blocked] and attempts > 1 ->
        join_one(herd, attempts - 1)

      # The home area is full: anywhere will do.
      {:error, :no_free_cell} when herd.area != nil and attempts > 1 ->
        join_one(%{herd | area: nil}, attempts - 1)

      result ->
        {result, herd}
    end
  end

  defp start_cell(%__MODULE__{spawn: :uniform, area: nil} = herd), do: {:random, herd}
  defp start_cell(%__MODULE__{spawn: :uniform, area: area} = herd), do: {{:within, area}, herd}

  defp start_cell(%__MODULE__{spawn: {:blob, {cx, cy}, spread}} = herd) do
    %Grid{} = grid = herd.api.grid(herd.world)
    terrain = herd.api.terrain(herd.world)
    blob_cell(herd, grid, terrain, cx, cy, spread, @blob_attempts)
  end

  defp blob_cell(herd, _grid, _terrain, _cx, _cy, _spread, 0), do: {:random, herd}

  defp blob_cell(herd, grid, terrain, cx, cy, spread, attempts) do
    {dx, rand} = :rand.normal_s(herd.rand)
    {dy, rand} = :rand.normal_s(rand)
    herd = %{herd | rand: rand}
    x = cx + round(dx * spread)
    y = cy + round(dy * spread)

    if Grid.in_bounds?(grid, x, y) and not Grove.World.Terrain.blocked?(terrain, x, y),
      do: {{x, y}, herd},
      else: blob_cell(herd, grid, terrain, cx, cy, spread, attempts - 1)
  end
end
