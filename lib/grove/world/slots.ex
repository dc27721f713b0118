defmodule Grove.World.Slots do
  @moduledoc false
  # What each zone has beside its process: the ETS table of its entities,
  # the table of its game's cell layer, and its counters (mailbox length as
  # last measured, moves handled, entities as of its last tick, changes of
  # its game's layer since the last save, the number of its last delta in
  # the feed, the count of changes at which its game's layer was laid
  # anew from the game's first values, or last saved, and whether anyone
  # watches it).
  #
  # A world whose zones all run (`zones: :always`) has them for every zone
  # from the start, in tuples and arrays indexed by zone, as fast to read
  # as anything: at most `Grove.World.Supervisor`'s limit of zones. A world
  # of zones on demand has them only for the zones it knows: a row per zone
  # in one table (`{index, table, game_table, counters}`), made when the
  # zone wakes (`open/2`) and, when it falls asleep (`close/4`), dropped
  # whole if it holds nothing, or kept as its counters alone when its
  # entities sleep in the store, or kept with its tables when they hold
  # what no store took. So a world of 400 million zones costs what its
  # awake and remembered zones cost, not what its size is.
  #
  # A zone's tables belong to the zone that made them, with the world's
  # keeper as heir: a zone that crashes leaves them to the keeper, and the
  # run that starts after it finds them in its row. Only the zone itself
  # deletes them, as it falls asleep, before it gives up its name; a reader
  # that took a table from the row a moment before reads it as empty.

  alias Grove.World

  @load 1
  @moves 2
  @entities 3
  @changes 4
  @seq 5
  @laid 6
  @watched 7
  @counters 7

  @typedoc "The table of a world of zones on demand, with a row per known zone."
  @type t :: :ets.tid()

  @doc "The table of known zones of a world of zones on demand."
  @spec new() :: t()
  def new,
    do: :ets.new(:grove_slots, [:set, :public, read_concurrency: true, write_concurrency: true])

  @doc """
  A zone's tables as it starts: those of its row when it has one (it slept
  with its tables kept, or its last run crashed), else made now, owned by
  the caller with the world's keeper as heir. Returns `{table, game_table}`
  (`game_table` nil in a world without a game).
  """
  @spec open(World.t(), non_neg_integer()) :: {:ets.tid(), :ets.tid() | nil}
  def open(%World{zones_on_demand: false} = world, index),
    do: {elem(world.tables, index), world.game_tables && elem(world.game_tables, index)}

  def open(%World{slots: slots} = world, index) do
    case :ets.lookup(slots, index) do
      [{^index, table, game_table, _counters}] when table != nil ->
        {table, game_table}

      found ->
        counters =
          case found do
            [{^index, nil, nil, counters}] -> counters
            [] -> new_counters()
          end

        heir = {:heir, Process.whereis(world.keeper), index}
        table = :ets.new(:grove_zone, [:set, :public, {:read_concurrency, true}, heir])

        game_table =
          if world.game,
            do:
              :ets.new(:grove_game_cells, [
                :ordered_set,
                :public,
                {:read_concurrency, true},
                heir
              ])

        :ets.insert(slots, {index, table, game_table, counters})
        {table, game_table}
    end
  end

  # A zone's count of its game's changes starts where no earlier run's
  # could be, 2^24 changes apart: the saver, which compares the count with
  # the one it saved, never takes a new run's for an old one's.
  defp new_counters do
    counters = :atomics.new(@counters, signed: false)
    base = :erlang.unique_integer([:positive, :monotonic]) * 16_777_216
    :atomics.put(counters, @changes, base)
    counters
  end

  @doc """
  What a zone of a world of zones on demand leaves as it falls asleep,
  after its entities and its game's layer went to the store, or not: its
  tables dropped if both are empty, its row too when it counts no entity
  (with its deltas in the feed, which no viewer reads: a sleeping zone
  has none); what remains is what a woken run needs.
  """
  @spec close(World.t(), non_neg_integer(), :ets.tid(), :ets.tid() | nil) ::
          :dropped | :counters | :kept
  def close(%World{zones_on_demand: false}, _index, _table, _game_table), do: :kept

  def close(%World{slots: slots} = world, index, table, game_table) do
    if :ets.info(table, :size) == 0 and (game_table == nil or :ets.info(game_table, :size) == 0) do
      [{^index, _, _, counters}] = :ets.lookup(slots, index)

      if :atomics.get(counters, @entities) == 0 do
        :ets.delete(slots, index)
        Grove.World.Feed.forget_zone(world.feed, index, :atomics.get(counters, @seq))
        drop(table, game_table)
        :dropped
      else
        :ets.insert(slots, {index, nil, nil, counters})
        drop(table, game_table)
        :counters
      end
    else
      :kept
    end
  end

  defp drop(table, game_table) do
    :ets.delete(table)
    if game_table, do: :ets.delete(game_table)
  end

  @doc "A zone's table of entities, or nil when it has none now."
  @spec table(World.t(), non_neg_integer()) :: :ets.tid() | nil
  def table(%World{zones_on_demand: false} = world, index), do: elem(world.tables, index)

  def table(%World{slots: slots}, index) do
    case :ets.lookup(slots, index) do
      [{_, table, _, _}] -> table
      [] -> nil
    end
  end

  @doc "A zone's table of its game's cell layer, or nil."
  @spec game_table(World.t(), non_neg_integer()) :: :ets.tid() | nil
  def game_table(%World{game_tables: nil, zones_on_demand: false}, _index), do: nil

  def game_table(%World{zones_on_demand: false} = world, index),
    do: elem(world.game_tables, index)

  def game_table(%World{slots: slots}, index) do
    case :ets.lookup(slots, index) do
      [{_, _, game_table, _}] -> game_table
      [] -> nil
    end
  end

  @doc "`:ets.lookup/2` on a zone's table; `[]` when it has none."
  @spec lookup(World.t(), non_neg_integer(), term()) :: [tuple()]
  def lookup(world, index, key), do: read(table(world, index), &:ets.lookup(&1, key), [])

  @doc "`:ets.select/2` on a zone's table; `[]` when it has none."
  @spec select(World.t(), non_neg_integer(), :ets.match_spec()) :: [term()]
  def select(world, index, spec), do: read(table(world, index), &:ets.select(&1, spec), [])

  @doc "Every row of a zone's table; `[]` when it has none."
  @spec rows(World.t(), non_neg_integer()) :: [tuple()]
  def rows(world, index), do: read(table(world, index), &:ets.tab2list/1, [])

  @doc "How many rows a zone's table holds; 0 when it has none."
  @spec size(World.t(), non_neg_integer()) :: non_neg_integer()
  def size(world, index), do: read(table(world, index), &(:ets.info(&1, :size) || 0), 0)

  @doc "True when a zone's table holds `key`."
  @spec member?(World.t(), non_neg_integer(), term()) :: boolean()
  def member?(world, index, key), do: read(table(world, index), &:ets.member(&1, key), false)

  @doc "`:ets.lookup/2` on a zone's game layer; `[]` when it has none."
  @spec game_lookup(World.t(), non_neg_integer(), term()) :: [tuple()]
  def game_lookup(world, index, key),
    do: read(game_table(world, index), &:ets.lookup(&1, key), [])

  @doc "`:ets.select/2` on a zone's game layer; `[]` when it has none."
  @spec game_select(World.t(), non_neg_integer(), :ets.match_spec()) :: [term()]
  def game_select(world, index, spec),
    do: read(game_table(world, index), &:ets.select(&1, spec), [])

  @doc "Deletes what matches `spec` from a zone's game layer; 0 when it has none."
  @spec game_select_delete(World.t(), non_neg_integer(), :ets.match_spec()) :: non_neg_integer()
  def game_select_delete(world, index, spec),
    do: read(game_table(world, index), &:ets.select_delete(&1, spec), 0)

  # A table dropped by its zone between the row's read and this one reads
  # as empty: the zone fell asleep with nothing in it.
  defp read(nil, _fun, none), do: none

  defp read(table, fun, none) do
    fun.(table)
  rescue
    ArgumentError -> none
  end

  ## Counters

  @doc "A zone's mailbox length as last measured."
  @spec load(World.t(), non_neg_integer()) :: non_neg_integer()
  def load(%World{zones_on_demand: false} = world, index), do: :atomics.get(world.load, index + 1)
  def load(world, index), do: get(world, index, @load)

  @doc """
  Where a zone's mailbox length is kept, to be read with `load_at/1`
  without looking the zone up again; nil for a zone on demand that has no
  counters. A zone on demand's counters are its row's, made as it wakes
  and dropped only as it falls asleep: what this gives holds for the run
  of the zone that was awake when it was read, and no longer.
  """
  @spec load_slot(World.t(), non_neg_integer()) :: {:atomics.atomics_ref(), pos_integer()} | nil
  def load_slot(%World{zones_on_demand: false} = world, index), do: {world.load, index + 1}

  def load_slot(world, index) do
    case counters(world, index) do
      nil -> nil
      counters -> {counters, @load}
    end
  end

  @doc "A zone's mailbox length as last measured, from its `load_slot/2`."
  @spec load_at({:atomics.atomics_ref(), pos_integer()}) :: non_neg_integer()
  def load_at({ref, at}), do: :atomics.get(ref, at)

  @doc "Records a zone's mailbox length."
  @spec put_load(World.t(), non_neg_integer(), non_neg_integer()) :: :ok
  def put_load(%World{zones_on_demand: false} = world, index, value),
    do: :atomics.put(world.load, index + 1, value)

  def put_load(world, index, value), do: put(world, index, @load, value)

  @doc "Counts moves a zone handled (one unless told)."
  @spec add_move(World.t(), non_neg_integer(), pos_integer()) :: :ok
  def add_move(world, index, by \\ 1)

  def add_move(%World{zones_on_demand: false} = world, index, by),
    do: :counters.add(world.zone_moves, index + 1, by)

  def add_move(world, index, by), do: add(world, index, @moves, by)

  @doc "The moves a zone handled (in its rows' life, for a zone on demand)."
  @spec moves(World.t(), non_neg_integer()) :: non_neg_integer()
  def moves(%World{zones_on_demand: false} = world, index),
    do: :counters.get(world.zone_moves, index + 1)

  def moves(world, index), do: get(world, index, @moves)

  @doc "A zone's entities as of its last tick (or as it fell asleep)."
  @spec entities(World.t(), non_neg_integer()) :: non_neg_integer()
  def entities(%World{zones_on_demand: false} = world, index),
    do: :atomics.get(world.zone_entities, index + 1)

  def entities(world, index), do: get(world, index, @entities)

  @doc "Records a zone's entities."
  @spec put_entities(World.t(), non_neg_integer(), non_neg_integer()) :: :ok
  def put_entities(%World{zones_on_demand: false} = world, index, value),
    do: :atomics.put(world.zone_entities, index + 1, value)

  def put_entities(world, index, value), do: put(world, index, @entities, value)

  @doc """
  True when someone watches the zone (a viewer subscribed to it), as the
  zone last said; false for a zone asleep or unknown.
  """
  @spec watched?(World.t(), non_neg_integer()) :: boolean()
  def watched?(%World{zones_on_demand: false} = world, index),
    do: :atomics.get(world.zone_watched, index + 1) == 1

  def watched?(world, index), do: get(world, index, @watched) == 1

  @doc "Records whether someone watches a zone; only the zone itself writes it."
  @spec put_watched(World.t(), non_neg_integer(), boolean()) :: :ok
  def put_watched(%World{zones_on_demand: false} = world, index, watched),
    do: :atomics.put(world.zone_watched, index + 1, if(watched, do: 1, else: 0))

  def put_watched(world, index, watched),
    do: put(world, index, @watched, if(watched, do: 1, else: 0))

  @doc "Changes of a zone's game layer, for the saver."
  @spec changes(World.t(), non_neg_integer()) :: non_neg_integer()
  def changes(%World{zones_on_demand: false} = world, index),
    do: :atomics.get(world.game_changes, index + 1)

  def changes(world, index), do: get(world, index, @changes)

  @doc "Counts a change of a zone's game layer."
  @spec touched(World.t(), non_neg_integer()) :: :ok
  def touched(%World{zones_on_demand: false} = world, index),
    do: :atomics.add(world.game_changes, index + 1, 1)

  def touched(world, index), do: add(world, index, @changes, 1)

  @doc """
  Records that a zone of a world of zones on demand has just laid its
  game's layer anew from the game's first values (nothing was saved of
  it): until it changes, it needs no save, since the game lays it again
  the same (`Grove.Game`'s `cell/3` is deterministic).
  """
  @spec laid(World.t(), non_neg_integer()) :: :ok
  def laid(%World{zones_on_demand: false}, _index), do: :ok
  def laid(world, index), do: put(world, index, @laid, changes(world, index))

  @doc """
  Records that the store has a zone's layer as it was at `changes` (the
  game's saver wrote it): as long as it has not changed since, it needs
  no save as the zone falls asleep.
  """
  @spec saved(World.t(), non_neg_integer(), non_neg_integer()) :: :ok
  def saved(%World{zones_on_demand: false}, _index, _changes), do: :ok
  def saved(world, index, changes), do: put(world, index, @laid, changes)

  @doc "Forgets that a zone's layer needs no save (`laid/2`, `saved/3`): it is saved as it sleeps."
  @spec unlaid(World.t(), non_neg_integer()) :: :ok
  def unlaid(%World{zones_on_demand: false}, _index), do: :ok
  def unlaid(world, index), do: put(world, index, @laid, 0)

  @doc """
  True when a zone's game layer needs no save: unchanged since the game
  laid it (`laid/2`) or since the store took it (`saved/3`), but by the
  game's own ticks, which a zone on demand does not count (`touched/2`).
  """
  @spec as_laid?(World.t(), non_neg_integer()) :: boolean()
  def as_laid?(%World{zones_on_demand: false}, _index), do: false

  def as_laid?(world, index) do
    case counters(world, index) do
      nil -> false
      counters -> :atomics.get(counters, @laid) == :atomics.get(counters, @changes)
    end
  end

  @doc false
  # The counters' array and position of a zone's feed number, or nil.
  @spec seq_slot(t(), non_neg_integer()) :: {:atomics.atomics_ref(), pos_integer()} | nil
  def seq_slot(slots, index) do
    case :ets.lookup(slots, index) do
      [{_, _, _, counters}] -> {counters, @seq}
      [] -> nil
    end
  end

  defp counters(%World{slots: slots}, index) do
    case :ets.lookup(slots, index) do
      [{_, _, _, counters}] -> counters
      [] -> nil
    end
  end

  defp get(world, index, at) do
    case counters(world, index) do
      nil -> 0
      counters -> :atomics.get(counters, at)
    end
  end

  defp put(world, index, at, value) do
    case counters(world, index) do
      nil -> :ok
      counters -> :atomics.put(counters, at, value)
    end
  end

  defp add(world, index, at, by) do
    case counters(world, index) do
      nil -> :ok
      counters -> :atomics.add(counters, at, by)
    end
  end

  ## The zones it knows

  @doc """
  The zones that have slots: every zone of a world whose zones all run;
  in a world of zones on demand, those awake and those asleep that keep
  entities or tables, in no order.
  """
  @spec known(World.t()) :: Enumerable.t()
  def known(%World{zones_on_demand: false} = world),
    do: 0..(Grove.World.Grid.zone_count(world.grid) - 1)

  def known(%World{slots: slots}), do: :ets.select(slots, [{{:"$1", :_, :_, :_}, [], [:"$1"]}])

  @doc """
  Each known zone's `{index, mailbox, moves, entities}`, read in one pass
  over the slots of a world of zones on demand, in no order.
  """
  @spec counts(World.t()) :: [
          {non_neg_integer(), non_neg_integer(), non_neg_integer(), non_neg_integer()}
        ]
  def counts(%World{zones_on_demand: false} = world) do
    for index <- known(world),
        do: {index, load(world, index), moves(world, index), entities(world, index)}
  end

  def counts(%World{slots: slots}) do
    :ets.foldl(
      fn {index, _, _, counters}, acc ->
        [
          {index, :atomics.get(counters, @load), :atomics.get(counters, @moves),
           :atomics.get(counters, @entities)}
          | acc
        ]
      end,
      [],
      slots
    )
  end

  @doc "How many zones have slots (see `known/1`)."
  @spec count(World.t()) :: non_neg_integer()
  def count(%World{zones_on_demand: false} = world), do: Grove.World.Grid.zone_count(world.grid)
  def count(%World{slots: slots}), do: :ets.info(slots, :size)
end
