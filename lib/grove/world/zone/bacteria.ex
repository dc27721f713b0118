defmodule Grove.World.Zone.Bacteria do
  @moduledoc false
  # The zone's share of the bacteria (Grove.World.Life), as plain data: the
  # generation its cells are at, the borders it published, the cells open
  # to life, the patterns players seeded for its next generation, and the
  # rules by which it computes one generation after another. The cells
  # themselves are in the zone's core (`Zone.State`, whose moves and views
  # see them). Each function returns the effects the zone process carries
  # out, in order, as `Zone.Handoff` does; it reads no table, no clock and
  # starts no timer itself.
  #
  # The zone publishes each generation's cells and borders in the world's
  # life table (one row per zone: `{zone, g, cells, borders of g, borders
  # of g - 1}`, owned by the keeper) and computes `g + 1` only once each of
  # its eight neighbours' rows holds generation `g` or `g + 1` (whose row
  # still has the borders of `g`). So neighbours are never more than one
  # generation apart, a zone needs no message from another, and one that
  # lags (busy, or restarting) holds up its neighbours, which poll its row,
  # rather than letting them compute from borders that do not exist yet. A
  # restarted zone carries on from its row. Generation `g` is due `g`
  # intervals after the world started, in every zone at once: a scheduler
  # woken once for all of them costs a fraction of one woken for each (see
  # docs/decisions.md); a zone that falls behind computes the generations
  # it owes one message at a time, so moves are served in between.
  #
  # The zone reads the neighbours' rows through `read_row`, a function it
  # passes in (an ETS lookup in a world, a map in a test), and says which
  # generation is due (by the clock, or as far as manual stepping asked).
  #
  # Zones on demand: a zone that sleeps keeps its board as it was, frozen;
  # `read_row` gives its borders as `{:frozen, edges}` (`nil` for a zone
  # that never ran: no cells), which its neighbours take at whatever
  # generation they compute. A zone that wakes does not compute the
  # generations it slept through: it resumes at the world's, with the
  # board it slept with (`recover/6`). Its neighbours may lag behind that
  # generation; until they catch up, the one it woke with is all they see
  # of it (a row more than one generation ahead gives its borders before).
  # In a cluster, a neighbour another node runs is asleep when its row
  # there has no cells, or when none came (`Grove.World.Zone`).
  #
  # The effects:
  #
  #   * `{:row, row}` - the zone's row into the life table;
  #   * `{:cells, born, died}` - the cells that came alive and died: the
  #     minimap's layer of bacteria and the world's count follow;
  #   * `{:generation, generation, births, deaths, live}` - a generation
  #     computed: counted, told (`[:grove, :life, :generation]`), and the
  #     zone ticks to publish what changed;
  #   * `{:wake, :now | {:at, time} | {:after, milliseconds}}` - when to
  #     look again: after what waits in the mailbox, when the next
  #     generation is due (a monotonic time, in milliseconds), or after a
  #     while (a neighbour lags);
  #   * `{:seeded, owner, id, tag, outcome}` - a seeding's outcome to its owner;
  #   * `{:send, zone, {:seed, ...}}` - a seeding that follows its entity;
  #   * `{:count, stat}` - one more in a `Grove.World.Stats` counter (a
  #     pattern seeded or refused; a look at the neighbours' rows that
  #     found one lagging).

  alias Grove.World.{Entity, Grid, Life, Terrain}
  alias Grove.World.Life.Board
  alias Grove.World.Zone.{Handoff, State}

  # Milliseconds between two looks at the neighbours' rows while they lag.
  @life_retry 10
  # Cells a zone may hold seeded for its next generation.
  @max_seeds 256

  defstruct [
    :index,
    :life,
    :epoch,
    :edges,
    generation: 0,
    live: 0,
    open: 0,
    memo: [],
    neighbours: %{},
    seeds: []
  ]

  @typedoc "A zone's row in the life table: generation, cells, borders, the borders before."
  @type row ::
          {Grid.zone_index(), non_neg_integer(), non_neg_integer(), Board.edges(),
           Board.edges() | nil}

  @typedoc """
  Reads a zone's row in the life table, or nil; the borders of a zone on
  demand that sleeps, `{:frozen, edges}`, `nil` for one that never ran.
  """
  @type read_row :: (Grid.zone_index() -> row() | {:frozen, Board.edges() | nil} | nil)

  @type t :: %__MODULE__{
          index: Grid.zone_index(),
          life: Life.t(),
          epoch: integer(),
          edges: Board.edges() | nil,
          generation: non_neg_integer(),
          live: non_neg_integer(),
          open: non_neg_integer(),
          memo: [{non_neg_integer(), map(), non_neg_integer()}],
          neighbours: %{Grid.direction() => Grid.zone_index() | nil},
          seeds: [Grid.cell()]
        }

  @type outcome :: :ok | {:rejected, atom()}

  @type effect ::
          {:row, row()}
          | {:cells, [Grid.cell()], [Grid.cell()]}
          | {:generation, pos_integer(), non_neg_integer(), non_neg_integer(), non_neg_integer()}
          | {:wake, :now | {:at, integer()} | {:after, pos_integer()}}
          | {:seeded, pid(), Entity.id(), term(), outcome()}
          | {:send, Grid.zone_index(), tuple()}
          | {:count, :seeds | :seeds_refused | :life_waits}

  @doc """
  The zone's cells of the automaton, put in `core`: from its `row` in the
  life table when it restarts, else generation 0, a soup laid by the
  world's `seed` where no entity stands. `life` is the world's, whose
  generation 0 was due at `epoch`.

  A zone on demand that wakes (`resume`, the generation the world is at)
  carries on from there with its row's board, or the soup when it never
  ran, rather than computing the generations it slept through.
  """
  @spec recover(Life.t(), integer(), term(), State.t(), row() | nil, non_neg_integer() | nil) ::
          {[effect()], State.t(), t()}
  def recover(%Life{} = life, epoch, seed, %State{index: index} = core, row, resume \\ nil) do
    board = Board.new(core.bounds)

    open =
      if core.rules.blocking,
        do: Board.open_where(board, fn x, y -> not Terrain.blocked?(core.terrain, x, y) end),
        else: Board.open_all(board)

    bacteria = %__MODULE__{
      index: index,
      life: life,
      epoch: epoch,
      open: open,
      neighbours: Life.neighbours(core.grid, index)
    }

    case row do
      {^index, generation, bits, edges, _previous} when resume == nil or generation >= resume ->
        board = %{board | bits: bits}

        {[], State.put_bacteria(core, board),
         %{bacteria | generation: generation, live: Board.count(board), edges: edges}}

      # Woken: the board it slept with, at the world's generation, its
      # borders before that the same (what its neighbours saw of it).
      {^index, _generation, bits, edges, _previous} ->
        board = %{board | bits: bits}

        {[{:row, {index, resume, bits, edges, edges}}], State.put_bacteria(core, board),
         %{bacteria | generation: resume, live: Board.count(board), edges: edges}}

      nil ->
        cells =
          Life.soup(life, seed, core.bounds, fn x, y ->
            Board.alive?(%{board | bits: open}, x, y) and not State.occupied?(core, x, y)
          end)

        board = Board.put(board, cells)
        edges = Board.edges(board)
        generation = resume || 0
        previous = if resume, do: edges

        {[{:row, {index, generation, board.bits, edges, previous}}, {:cells, cells, []}],
         State.put_bacteria(core, board),
         %{bacteria | generation: generation, live: length(cells), edges: edges}}
    end
  end

  @doc """
  Computes the next generation if it is due (`target` is the generation
  the world is due at) and the neighbours' rows allow, and says when to
  look again: at once if more are owed (one generation per message, so
  moves are served in between), when the next is due, or a little later
  while a neighbour lags. A world stepped by hand wakes zones itself.
  """
  @spec advance(t(), State.t(), non_neg_integer(), read_row()) :: {[effect()], State.t(), t()}
  def advance(%__MODULE__{generation: generation} = bacteria, core, target, _read_row)
      when generation >= target,
      do: {due(bacteria), core, bacteria}

  def advance(%__MODULE__{} = bacteria, core, target, read_row) do
    case halo(bacteria, read_row) do
      {:ok, halo} ->
        {effects, core, bacteria} = next_generation(bacteria, core, halo)
        wake = if bacteria.generation < target, do: [{:wake, :now}], else: due(bacteria)
        {effects ++ wake, core, bacteria}

      # Counted: in a cluster, a node whose clock runs ahead shows here.
      :wait ->
        {[{:count, :life_waits}, {:wake, {:after, @life_retry}}], core, bacteria}
    end
  end

  defp due(%__MODULE__{life: %Life{interval: :manual}}), do: []

  defp due(%__MODULE__{life: %Life{interval: interval}} = bacteria),
    do: [{:wake, {:at, bacteria.epoch + (bacteria.generation + 1) * interval}}]

  @doc """
  The generation the world is due at, `now` (monotonic milliseconds), for
  a world whose bacteria run on the clock.
  """
  @spec target(t(), integer()) :: non_neg_integer()
  def target(%__MODULE__{life: %Life{interval: interval}, epoch: epoch}, now)
      when is_integer(interval) do
    elapsed = now - epoch
    if elapsed < 0, do: 0, else: div(elapsed, interval)
  end

  # The neighbours' borders of this zone's generation, or `:wait` while one
  # of them has not published it yet.
  defp halo(%__MODULE__{generation: generation, neighbours: neighbours}, read_row) do
    Enum.reduce_while(neighbours, {:ok, %{}}, fn
      {_direction, nil}, acc ->
        {:cont, acc}

      {direction, neighbour}, {:ok, halo} ->
        case read_row.(neighbour) do
          {_, ^generation, _bits, edges, _previous} ->
            {:cont, {:ok, Map.put(halo, direction, edges)}}

          # One ahead, or further, which only a zone that woke at the
          # world's generation is: its borders before.
          {_, ahead, _bits, _edges, previous} when ahead > generation and previous != nil ->
            {:cont, {:ok, Map.put(halo, direction, previous)}}

          # Asleep (a zone on demand): its board stands still.
          {:frozen, nil} ->
            {:cont, {:ok, halo}}

          {:frozen, edges} ->
            {:cont, {:ok, Map.put(halo, direction, edges)}}

          _ ->
            {:halt, :wait}
        end
    end)
  end

  # One generation: the rule, then the interaction with the world (no
  # birth under an entity; seeded cells where still free), then the row
  # that lets the neighbours go on.
  defp next_generation(%__MODULE__{} = bacteria, core, halo) do
    board = core.bacteria
    {stepped, memo} = step(bacteria, board, halo)

    {next, born, died, edges} =
      if stepped.bits == board.bits and bacteria.seeds == [] do
        # Still life (or nothing at all): no cell changes, the borders stay.
        {board, [], [], bacteria.edges}
      else
        changes(bacteria, core, board, stepped)
      end

    generation = bacteria.generation + 1
    births = length(born)
    deaths = length(died)
    live = bacteria.live + births - deaths

    effects = [
      {:row, {bacteria.index, generation, next.bits, edges, bacteria.edges}},
      {:cells, born, died},
      {:generation, generation, births, deaths, live}
    ]

    {effects, State.next_generation(core, next, born, died),
     %{bacteria | generation: generation, live: live, edges: edges, memo: memo, seeds: []}}
  end

  # The rule's step, remembered for the last two boards and borders it was
  # given: a still life, a blinker or an empty zone between quiet
  # neighbours gets the same two inputs over and over.
  defp step(%__MODULE__{memo: memo} = bacteria, board, halo) do
    bits = board.bits

    case Enum.find(memo, fn {input, around, _output} -> input == bits and around == halo end) do
      {_input, _around, output} ->
        {%{board | bits: output}, memo}

      nil ->
        next = Board.step(board, bacteria.life.rule, halo, bacteria.open)
        {next, [{bits, halo, next.bits} | Enum.take(memo, 1)]}
    end
  end

  # The interaction with the world: no birth under an entity, seeded cells
  # where still free; the cells born and dead, and the new borders.
  defp changes(bacteria, core, board, next) do
    born = Board.to_cells(next, Bitwise.band(next.bits, Bitwise.bnot(board.bits)))
    {under, born} = Enum.split_with(born, fn {x, y} -> State.occupied?(core, x, y) end)

    seeded =
      for {x, y} = cell <- Enum.uniq(bacteria.seeds),
          Board.alive?(%{next | bits: bacteria.open}, x, y),
          not Board.alive?(next, x, y),
          not State.occupied?(core, x, y),
          do: cell

    next = next |> Board.clear(under) |> Board.put(seeded)
    died = Board.to_cells(board, Bitwise.band(board.bits, Bitwise.bnot(next.bits)))
    {next, born ++ seeded, died, Board.edges(next)}
  end

  @doc """
  A pattern seeded by entity `id`'s owner in front of it, `hops` times
  forwarded already: checked against the zone as it is now (`busy` while
  it sheds load), and put in at the next generation on the cells still
  free then (the neighbours have the borders of this one already). An
  entity that is not here is followed to the zone the directory
  (`locate`) names.
  """
  @spec seed(
          t(),
          State.t(),
          {Entity.id(), atom(), Grid.direction(), pid(), term(), non_neg_integer()},
          Handoff.locate(),
          boolean()
        ) :: {[effect()], t()}
  def seed(
        %__MODULE__{} = bacteria,
        core,
        {id, pattern, direction, owner, tag, hops},
        locate,
        busy
      ) do
    case State.fetch(core, id) do
      {:ok, %Entity{owner: ^owner} = entity} ->
        cells = Life.pattern_cells(pattern, {entity.x, entity.y}, direction)

        case check(bacteria, core, cells, busy) do
          :ok ->
            {[{:count, :seeds}, {:seeded, owner, id, tag, :ok}],
             %{bacteria | seeds: cells ++ bacteria.seeds}}

          {:rejected, _reason} = rejected ->
            {[{:count, :seeds_refused}, {:seeded, owner, id, tag, rejected}], bacteria}
        end

      {:ok, %Entity{}} ->
        {[{:seeded, owner, id, tag, {:rejected, :not_owner}}], bacteria}

      :error ->
        case Handoff.follow(core, id, hops, locate) do
          {:ok, to} ->
            {[{:send, to, {:seed, id, pattern, direction, owner, tag, hops + 1}}], bacteria}

          :error ->
            {[{:seeded, owner, id, tag, {:rejected, :unknown_entity}}], bacteria}
        end
    end
  end

  defp check(bacteria, %State{grid: grid} = core, cells, busy) do
    pending = MapSet.new(bacteria.seeds)

    cond do
      busy ->
        {:rejected, :busy}

      not Enum.all?(cells, fn {x, y} -> Grid.in_bounds?(grid, x, y) end) ->
        {:rejected, :out_of_bounds}

      not Enum.all?(cells, fn {x, y} -> State.inside?(core, x, y) end) ->
        {:rejected, :zone_edge}

      core.rules.blocking and
          Enum.any?(cells, fn {x, y} -> Terrain.blocked?(core.terrain, x, y) end) ->
        {:rejected, :blocked}

      Enum.any?(cells, fn {x, y} ->
        State.occupied?(core, x, y) or State.live?(core, x, y) or MapSet.member?(pending, {x, y})
      end) ->
        {:rejected, :occupied}

      length(bacteria.seeds) + length(cells) > @max_seeds ->
        {:rejected, :busy}

      true ->
        :ok
    end
  end
end
