defmodule Grove.World.Game.Saver do
  @moduledoc false
  # Saves the game's state of this node's zones to the store, in batches:
  # every `save` milliseconds (the game's option, default 5 s) it looks at
  # each zone's count of layer changes (`Grove.World.Game.touched/2`, in
  # :atomics), reads what changed of those that changed since it last
  # saved them from their tables (no message to any zone), and writes them
  # all in one `save_state/3` call (`Grove.World.Game.Storage`), which the
  # store commits in one transaction with whatever else waits. What it
  # writes of a zone is a base (its whole layer) once per run of the zone,
  # then only the cells changed since, which the zone marks in its table
  # (`Grove.World.Game.Save`): a few cells every few seconds where a whole
  # layer was encoded and written. A zone that starts with nothing
  # in its table (a new world, or a lost node's zone on a survivor) loads
  # its last save (`Grove.World.Game.load/2`).
  #
  # So a zone comes back at most one interval, plus the write, older than
  # it was; what the store could not take is tried again at the next
  # interval. On shutdown the last batch is written (trapping the exit).
  # Entities' attributes are not saved here: they travel with their
  # entities, and players come back through their sessions.

  use GenServer

  alias Grove.World
  alias Grove.World.Game.{Save, Storage}
  alias Grove.World.{Slots, Stats}

  require Logger

  # Changes written of a base before the next is a base again, whatever
  # their size: a minute at the default interval.
  @changes_per_base 12

  defstruct [:world, :store, :timer, saved: %{}, bases: %{}, failing: false]

  def start_link(world_name), do: GenServer.start_link(__MODULE__, world_name)

  def child_spec(world_name) do
    %{id: __MODULE__, start: {__MODULE__, :start_link, [world_name]}, shutdown: 10_000}
  end

  @doc false
  # Saves what changed now (tests and tools).
  def save_now(saver), do: GenServer.call(saver, :save, :infinity)

  @impl true
  def init(world_name) do
    Process.flag(:trap_exit, true)
    world = World.fetch!(world_name)
    state = %__MODULE__{world: world_name, store: world.store}
    {:ok, schedule(state, world)}
  end

  @impl true
  def handle_call(:save, _from, state) do
    {result, state} = save(state)
    {:reply, result, state}
  end

  @impl true
  def handle_info(:save, state) do
    {_result, state} = save(%{state | timer: nil})
    {:noreply, schedule(state, World.fetch!(state.world))}
  end

  def handle_info({:EXIT, _from, reason}, state), do: {:stop, reason, state}

  @impl true
  def terminate(_reason, state) do
    case save(state) do
      {:ok, _state} ->
        :ok

      {{:error, _}, _state} ->
        Logger.error("game: the zones' last changes could not be saved before the stop")
    end
  end

  # The zones a world of zones on demand no longer knows have gone with
  # their counts; a zone that wakes again counts from where no earlier run
  # could, so what was saved of them is forgotten here too.
  defp forget_unknown(state, %World{zones_on_demand: true}, known),
    do: %{state | saved: Map.take(state.saved, known), bases: Map.take(state.bases, known)}

  defp forget_unknown(state, _world, _known), do: state

  defp schedule(state, %World{game: spec}),
    do: %{state | timer: Process.send_after(self(), :save, spec.save)}

  defp save(state) do
    world = World.fetch!(state.world)
    known = Slots.known(world)
    state = forget_unknown(state, world, known)

    # A layer as the game laid it, or as its zone saved it, unchanged
    # since, needs no save (`Grove.World.Slots.as_laid?/2`).
    dirty =
      for index <- known,
          World.zone_node(world, index) == node(),
          changes = Slots.changes(world, index),
          changes != Map.get(state.saved, index, 0),
          not Slots.as_laid?(world, index),
          save = zone_save(state, world, index),
          save != nil,
          do: {index, changes, save}

    if dirty == [], do: {:ok, state}, else: write(state, world, dirty)
  end

  # What to write of a zone: the cells changed since the base this saver
  # wrote for the zone's run now (`{:changes, entries, base}`), or a new
  # base, when it wrote none for this run (a zone that starts, wakes or
  # arrives takes a base first), when its game's version changed, when
  # the changes are worth a new base (`Grove.World.Game.Save.compact?/2`),
  # or after `@changes_per_base` changes: a base that another writer
  # replaced in a race (a node that handed the zone over, still saving
  # it) leaves this saver's changes unapplied at most that long.
  defp zone_save(state, %World{game: spec} = world, index) do
    pid = World.zone_pid(world, index)

    case Map.get(state.bases, index) do
      {^pid, version, id, size, written} = base
      when pid != nil and version == spec.version and written < @changes_per_base ->
        case World.Game.changed(world, index) do
          nil ->
            nil

          cells ->
            if Save.compact?(length(cells), size),
              do: base_save(world, index, pid),
              else:
                {:changes, [{Save.changes_key(index), Save.encode_changes(version, cells, id)}],
                 put_elem(base, 4, written + 1)}
        end

      _none_for_this_run ->
        base_save(world, index, pid)
    end
  end

  # The marks go before the layer is read: a cell that changes after is
  # marked again, for the next changes.
  defp base_save(world, index, pid) do
    World.Game.forget_changed(world, index)

    case World.Game.layer(world, index) do
      nil ->
        nil

      rows ->
        {entries, id} = World.Game.base_entries(world, index, rows)
        {:base, entries, {pid, world.game.version, id, length(rows), 0}}
    end
  end

  defp write(state, world, dirty) do
    entries = Enum.flat_map(dirty, fn {_index, _changes, {_kind, entries, _base}} -> entries end)

    case Storage.save_state(state.store, World.Game.save_scope(world), entries) do
      :ok ->
        World.Game.has_saves(world, for({index, _, _} <- dirty, do: index))
        Stats.incr(world.stats, :game_saves)
        Stats.incr(world.stats, :game_zones_saved, length(dirty))

        Stats.incr(
          world.stats,
          :game_bases_saved,
          Enum.count(dirty, &match?({_, _, {:base, _, _}}, &1))
        )

        World.Game.saved(world)
        if state.failing, do: Logger.info("game: saving the zones' state again")

        state =
          Enum.reduce(dirty, state, fn {index, changes, {_kind, _entries, base}}, state ->
            # A zone on demand that falls asleep unchanged since needs not write it again.
            Slots.saved(world, index, changes)

            %{
              state
              | saved: Map.put(state.saved, index, changes),
                bases: Map.put(state.bases, index, base)
            }
          end)

        {:ok, %{state | failing: false}}

      {:error, _reason} = error ->
        Stats.incr(world.stats, :game_save_failures)

        unless state.failing,
          do:
            Logger.warning(
              "game: the store could not take the zones' state; trying again every #{world.game.save} ms"
            )

        # A base not written took its zone's marks: the next save is a base again.
        bases =
          for {index, _changes, {:base, _entries, _base}} <- dirty,
              reduce: state.bases,
              do: (bases -> Map.delete(bases, index))

        {error, %{state | failing: true, bases: bases}}
    end
  end
end
