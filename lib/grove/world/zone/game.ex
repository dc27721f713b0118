defmodule Grove.World.Zone.Game do
  @moduledoc false
  # A zone's share of the world's game (Grove.Game), as plain functions on
  # `Zone.State`, like `Zone.Handoff`: the cell layer of the zone's cells,
  # the game's callbacks called at the right moments, and their effects
  # applied. The zone process carries out what they leave behind
  # (`take_output/1`: rows to write, tallies to send, failures to log) and
  # publishes what viewers see (`flush/1`, `snapshot/1`).
  #
  # The layer is a map from cell key to value, with the values' visible
  # codes (`codes`) and where they block or free movement (`walk`) kept
  # beside it, so that a move reads one map and a snapshot lists codes
  # without calling the game. An entity's attributes and look are fields
  # of the entity, so they travel with it in a handoff.
  #
  # Actions. `act/8` takes one from a client, like `Zone.Handoff.move/8`
  # takes a move: an entity away (handed over, or acting elsewhere) has it
  # deferred; one not here has it follow the directory. The target is the
  # actor's cell or one next to it. When the target lies in this zone, the
  # game's `act/2` runs here. When it lies in another zone, the action runs
  # there, where the target's state is: the actor is marked acting (its
  # operations wait, as during a handoff, so its attributes cannot change
  # meanwhile), the other zone gets `{:act_at, act, from, owner, tag}`,
  # runs the game with a copy of the actor, applies the effects on its own
  # cells and entities, and answers `{:act_done, id, tag, owner, outcome,
  # attrs}` with the actor's new attributes, which this zone sets before it
  # answers the client and replays what waited. Zones never call each
  # other; an answer that never comes (the other zone died) is settled by
  # `expire/3` as `interrupted`.
  #
  # Failure. A callback that raises, throws, exits or answers something
  # malformed leaves the state as it was (effects are applied only once it
  # has returned, and all of them or none): the action is answered
  # `interrupted`, a hook does nothing, and the failure is left for the
  # zone process to log and count.

  alias Grove.Game
  alias Grove.Game.Act
  alias Grove.World.Game.Spec
  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{Handoff, State}

  require Grid

  defstruct [
    :spec,
    layer: %{},
    codes: %{},
    walk: %{},
    # The keys of the cells a tick may change (the game's `ticks?/1`).
    ticking: %{},
    cells_out: %{},
    entities_out: %{},
    tallies: [],
    failures: [],
    shown: %{},
    looks: %{},
    owed: 0,
    roll: 0,
    at: nil
  ]

  @type key :: non_neg_integer()

  @type t :: %__MODULE__{
          spec: Spec.t(),
          layer: %{key() => Game.value()},
          codes: %{key() => 1..255},
          walk: %{key() => boolean()},
          cells_out: %{key() => true},
          entities_out: %{Entity.id() => true},
          tallies: [{atom(), integer() | String.t(), integer()}],
          failures: [failure()],
          shown: %{key() => byte()},
          looks: %{Entity.id() => byte()},
          owed: non_neg_integer(),
          roll: non_neg_integer(),
          at: integer() | nil
        }

  @typedoc "A callback that failed: the module, the callback, and what happened."
  @type failure :: {module(), atom(), Exception.kind(), term(), Exception.stacktrace()}

  @typedoc "An action as clients ask for it: name, target and checked arguments."
  @type request :: {atom(), Grid.direction() | :here | Grid.cell(), map()}

  @type outcome :: {:ok, map()} | {:refused, atom()} | {:rejected, atom()}

  @typedoc "What the zone process writes and sends after an operation."
  @type output :: %{
          cells: [{key(), Game.value(), byte(), boolean() | nil}],
          entities: [Entity.t()],
          tallies: [{atom(), integer() | String.t(), integer()}],
          failures: [failure()]
        }

  ## Setting up

  @doc """
  Gives the zone its game: with `rows` (`{key, value}` from the zone's
  table or the store) as they were, or with `:generate`, each cell's first
  value from the game's `cell/3`. `nil` is no game.
  """
  @spec setup(State.t(), Spec.t() | nil, [{key(), Game.value()}] | :generate) :: State.t()
  def setup(%State{} = state, nil, _rows), do: %{state | game: nil}

  def setup(%State{} = state, %Spec{} = spec, :generate) do
    state = %{state | game: %__MODULE__{spec: spec}}
    {pairs, state} = generate(state, spec)
    lay_new(state, pairs)
  end

  def setup(%State{} = state, %Spec{} = spec, rows) do
    state = %{state | game: %__MODULE__{spec: spec}}

    Enum.reduce(rows, state, fn {key, value}, state ->
      try do
        put_layer(state, key, value, false)
      catch
        {:bad_effect, why} -> fail(state, spec.module, :show, :error, why, [])
        kind, reason -> fail(state, spec.module, :show, kind, reason, __STACKTRACE__)
      end
    end)
  end

  @doc """
  As `setup/3`, with `rows` of version `from` of the game: when the game
  runs another version now (its code was reloaded while the zone did not
  run), they and the entities' attributes go through its `upgrade/3`
  first, as in `renew/2`; an upgrade that fails leaves them as they were,
  of version `from` still, with the failure to log.
  """
  @spec setup(State.t(), Spec.t(), [{key(), Game.value()}], non_neg_integer()) :: State.t()
  def setup(%State{} = state, %Spec{version: version} = spec, rows, version),
    do: setup(state, spec, rows)

  def setup(%State{} = state, %Spec{} = spec, rows, from) do
    old = %{state | game: %__MODULE__{spec: %{spec | version: from}, layer: Map.new(rows)}}

    case renew(old, spec) do
      {:ok, state} ->
        state

      {:error, %State{game: %__MODULE__{failures: failures}}} ->
        state = setup(state, %{spec | version: from}, rows)
        %{state | game: %{state.game | failures: failures ++ state.game.failures}}
    end
  end

  # The ground's kinds by code, as `generate/2` reads a zone's ground.
  @by_code Terrain.kinds()
           |> Enum.sort_by(&elem(&1, 1))
           |> Enum.map(&elem(&1, 0))
           |> List.to_tuple()

  # The first value of every cell of the zone, row by row along its
  # ground's bytes (a zone on demand lays it at each first wake: a call of
  # `cell/3` for each of a zone of 50's 2,500 cells, the most of a wake
  # after its ground). The hook is called through a fun made once, not
  # through its module at each cell, which looks the function up at every
  # call, and with no handler of its own per cell. A cell whose `cell/3`
  # fails has none: the zone is then laid again cell by cell (`lay/5`),
  # and the first such failure kept, to be logged.
  defp generate(
         %State{bounds: {x0, y0, x1, _y1} = bounds} = state,
         %Spec{hooks: %{cell: true}} = spec
       ) do
    %Terrain.Area{cells: ground} = Terrain.crop(state.terrain, bounds)
    cell = Function.capture(spec.module, :cell, 3)

    try do
      {lay_all(ground, x0, y0, x0, x1, state.grid, cell, spec.config, []), state}
    catch
      _kind, _reason ->
        kinds = Terrain.kinds() |> Map.new(fn {kind, code} -> {code, kind} end)
        lay(ground, x0, y0, {x0, x1, kinds, state.grid, spec}, {[], state})
    end
  end

  defp generate(state, _spec), do: {[], state}

  # The pairs of the cells `cell/3` gives a value, last cell first, as
  # `lay/5` lays them (a ground's codes are its kinds' places in
  # `@by_code`). A cell's key is `Grid.cell_key/3`'s, worked out only for
  # the few cells that have a value. What stays the same along the zone
  # is passed as arguments of their own, not read out of a tuple at
  # every cell.
  defp lay_all(<<code, ground::binary>>, x, y, x0, x1, grid, cell, config, pairs) do
    pairs =
      case cell.({x, y}, elem(@by_code, code), config) do
        nil -> pairs
        value -> [{Grid.cell_key(grid, x, y), value} | pairs]
      end

    if x + 1 < x1,
      do: lay_all(ground, x + 1, y, x0, x1, grid, cell, config, pairs),
      else: lay_all(ground, x0, y + 1, x0, x1, grid, cell, config, pairs)
  end

  defp lay_all(<<>>, _x, _y, _x0, _x1, _grid, _cell, _config, pairs), do: pairs

  # A layer laid anew on a zone with none yet: each value's code, wall
  # and tick worked out as `put_layer/4` works them out, in the pairs'
  # order, and the maps made once from them, where `put_layer/4` grows
  # four maps a value at a time (the pairs' keys are the zone's cells,
  # each once, and no value is nil). A value whose code, wall or tick
  # fails is left out, with its failure, as there.
  defp lay_new(%State{game: %__MODULE__{spec: spec}} = state, pairs) do
    {state, layer, codes, walk, ticking} =
      Enum.reduce(pairs, {state, [], [], [], []}, fn {key, value} = pair, acc ->
        {state, layer, codes, walk, ticking} = acc

        try do
          {code!(spec, :show, value), walk(spec, value), ticks?(spec, value)}
        catch
          {:bad_effect, why} ->
            {fail(state, spec.module, :show, :error, why, []), layer, codes, walk, ticking}

          kind, reason ->
            state = fail(state, spec.module, :show, kind, reason, __STACKTRACE__)
            {state, layer, codes, walk, ticking}
        else
          {code, blocks, ticks?} ->
            codes = if code == 0, do: codes, else: [{key, code} | codes]
            walk = if blocks == nil, do: walk, else: [{key, blocks} | walk]
            ticking = if ticks?, do: [{key, true} | ticking], else: ticking
            {state, [pair | layer], codes, walk, ticking}
        end
      end)

    game = %{
      state.game
      | layer: :maps.from_list(layer),
        codes: :maps.from_list(codes),
        walk: :maps.from_list(walk),
        ticking: :maps.from_list(ticking)
    }

    %{state | game: game}
  end

  defp lay(<<code, ground::binary>>, x, y, {x0, x1, kinds, grid, spec} = zone, {pairs, state}) do
    module = spec.module

    laid =
      try do
        module.cell({x, y}, Map.fetch!(kinds, code), spec.config)
      catch
        kind, reason ->
          state =
            if state.game.failures == [],
              do: fail(state, module, :cell, kind, reason, __STACKTRACE__),
              else: state

          {pairs, state}
      else
        nil -> {pairs, state}
        value -> {[{Grid.cell_key(grid, x, y), value} | pairs], state}
      end

    if x + 1 < x1,
      do: lay(ground, x + 1, y, zone, laid),
      else: lay(ground, x0, y + 1, zone, laid)
  end

  defp lay(<<>>, _x, _y, _zone, laid), do: laid

  @doc """
  The zone's layer as its table's rows: `{key, value, code, walk}`, where
  `walk` is `true` (the value blocks), `false` (it frees the ground) or `nil`.
  """
  @spec rows(State.t()) :: [{key(), Game.value(), byte(), boolean() | nil}]
  def rows(%State{game: nil}), do: []

  def rows(%State{game: game}), do: for({key, _value} <- game.layer, do: row(game, key))

  defp row(game, key),
    do: {key, Map.get(game.layer, key), Map.get(game.codes, key, 0), Map.get(game.walk, key)}

  @doc """
  The game's code changed (live reload): `spec` is its new description.
  When its version differs from the one the zone runs, every value and
  every attribute goes through `upgrade/3` first; a failing upgrade leaves
  the zone on its old state, with the failure to log.
  """
  @spec renew(State.t(), Spec.t()) :: {:ok, State.t()} | {:error, State.t()}
  def renew(%State{game: nil} = state, _spec), do: {:ok, state}

  def renew(%State{game: %__MODULE__{spec: old} = game} = state, %Spec{} = spec) do
    if old.version == spec.version do
      {:ok, recode(%{state | game: %{game | spec: spec}})}
    else
      module = spec.module

      try do
        layer =
          Map.new(game.layer, fn {key, v} -> {key, module.upgrade(:cell, v, old.version)} end)

        entities =
          Map.new(state.entities, fn
            {id, %Entity{attrs: nil} = entity} ->
              {id, entity}

            {id, entity} ->
              {id, %{entity | attrs: module.upgrade(:attrs, entity.attrs, old.version)}}
          end)

        state = %{state | entities: entities, game: %{game | spec: spec, layer: layer}}
        state = recode(state)
        outs = for {key, _} <- layer, into: game.cells_out, do: {key, true}
        ids = for {id, _} <- entities, into: state.game.entities_out, do: {id, true}
        {:ok, %{state | game: %{state.game | cells_out: outs, entities_out: ids}}}
      catch
        kind, reason ->
          {:error, fail(state, module, :upgrade, kind, reason, __STACKTRACE__)}
      end
    end
  end

  # Codes, walls and looks again from the values, as the code says now;
  # what changed shows in the next delta.
  defp recode(%State{game: game} = state) do
    state = %{state | game: %{game | codes: %{}, walk: %{}, ticking: %{}}}

    state =
      Enum.reduce(game.layer, state, fn {key, value}, state ->
        put_layer(state, key, value, true)
      end)

    Enum.reduce(state.entities, state, fn {id, entity}, state ->
      look = look(state.game.spec, entity.attrs)

      if look == entity.look,
        do: state,
        else: set_attrs(state, id, entity.attrs, look)
    end)
  end

  ## Reading

  @doc """
  The layer within a square of the zone's cells (`{x0, y0, x1, y1}`,
  inclusive), as `Grove.World.Game.near/3` reads it from the zone's
  table: the values by cell, and where they block or free the ground.
  The layer is small beside the zone (a few cells in a hundred), so one
  pass over it costs less than a lookup per cell of the square.
  """
  @spec near(State.t(), {integer(), integer(), integer(), integer()}) ::
          {%{Grid.cell() => Game.value()}, %{Grid.cell() => boolean()}}
  def near(%State{game: %__MODULE__{layer: layer, walk: walk}, grid: grid}, {x0, y0, x1, y1}) do
    Enum.reduce(layer, {%{}, %{}}, fn {key, value}, {cells, walls} = acc ->
      {x, y} = cell = Grid.cell_of_key(grid, key)

      if x >= x0 and x <= x1 and y >= y0 and y <= y1 do
        case walk do
          %{^key => blocks} -> {Map.put(cells, cell, value), Map.put(walls, cell, blocks)}
          _ -> {Map.put(cells, cell, value), walls}
        end
      else
        acc
      end
    end)
  end

  @doc "True when nothing may step onto the cell (which lies in the zone): layer, then ground."
  @spec blocked?(State.t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def blocked?(%State{game: %__MODULE__{walk: walk}} = state, x, y) when map_size(walk) > 0 do
    case Map.fetch(walk, Grid.cell_key(state.grid, x, y)) do
      {:ok, blocks} -> blocks
      :error -> ground_blocked?(state, x, y)
    end
  end

  def blocked?(state, x, y), do: ground_blocked?(state, x, y)

  defp ground_blocked?(%State{rules: %Rules{blocking: blocking}, terrain: terrain}, x, y),
    do: blocking and Terrain.blocked?(terrain, x, y)

  ## Hooks

  @doc "An entity was placed here: the game's `join/3`, told `info`."
  @spec joined(State.t(), Entity.id(), map()) :: {:ok, Entity.t(), State.t()}
  def joined(%State{game: %__MODULE__{spec: %{hooks: %{join: true}} = spec}} = state, id, info) do
    state = settle(state)
    %{^id => entity} = state.entities
    state = hook(state, spec, :join, [entity, info, state], id)
    {:ok, Map.fetch!(state.entities, id), state}
  end

  def joined(%State{} = state, id, _info), do: {:ok, Map.fetch!(state.entities, id), state}

  @doc "An entity stepped onto its cell (from `from`): the game's `enter/2`."
  @spec entered(State.t(), Entity.id(), Grid.cell()) ::
          {:moved, Entity.t(), Grid.cell(), State.t()}
  def entered(%State{game: %__MODULE__{spec: %{hooks: %{enter: true}} = spec}} = state, id, from) do
    %{^id => entity} = state.entities
    state = hook(state, spec, :enter, [entity, state], id)
    {:moved, Map.fetch!(state.entities, id), from, state}
  end

  # A game whose `enter/2` acts only where the layer holds a value
  # (`enter_cells/0` says `:layer`) is not called on any other step.
  def entered(
        %State{game: %__MODULE__{spec: %{hooks: %{enter: :layer}} = spec, layer: layer}} = state,
        id,
        from
      ) do
    %{^id => %Entity{x: x, y: y} = entity} = state.entities

    if is_map_key(layer, Grid.cell_key(state.grid, x, y)) do
      state = hook(state, spec, :enter, [entity, state], id)
      {:moved, Map.fetch!(state.entities, id), from, state}
    else
      {:moved, entity, from, state}
    end
  end

  def entered(%State{entities: entities} = state, id, from) do
    %{^id => entity} = entities
    {:moved, entity, from, state}
  end

  @doc "An entity is about to go for good: the game's `leave/2`."
  @spec left(State.t(), Entity.id()) :: State.t()
  def left(%State{game: %__MODULE__{spec: %{hooks: %{leave: true}} = spec}} = state, id) do
    state = settle(state)
    %{^id => entity} = state.entities
    hook(state, spec, :leave, [entity, state], id)
  end

  def left(state, _id), do: state

  # The random integers games' ticks get: 0 to 2^24 - 1, as actors' rolls.
  @roll_max 0xFFFFFF

  @doc "A random integer for a tick, in `0..2^24 - 1` (the zone process draws it)."
  @spec roll() :: non_neg_integer()
  def roll, do: :rand.uniform(@roll_max + 1) - 1

  @doc """
  A game tick in this zone, with a random integer: the game's `tick/2`;
  or, in a zone nobody watches of a game with `catch_up/3`, a tick owed,
  run with the others owed once `:catch_up` of them are, or before
  anything reads what they change (`settle/1`).
  """
  @spec tick(State.t(), non_neg_integer()) :: State.t()
  def tick(
        %State{watched: false, game: %__MODULE__{spec: %{hooks: %{catch_up: true}}}} = state,
        roll
      ) do
    %{game: %__MODULE__{spec: spec, owed: owed} = game} = state
    state = %{state | game: %{game | owed: owed + 1, roll: roll}}
    if owed + 1 >= spec.catch_up, do: settle(state), else: state
  end

  def tick(%State{game: %__MODULE__{spec: %{hooks: %{tick: true}} = spec}} = state, roll) do
    state = settle(state)
    hook(state, spec, :tick, [state, roll], 0)
  end

  def tick(state, _roll), do: state

  @doc """
  The game's ticks on its clock (a game that ticks every `interval` ms,
  its tick `index` falling due at `index * interval + phase`): every
  tick up to `index` has fallen due. In a zone nobody watches of a game
  with `catch_up/3`, they are owed since the last one counted (and run
  once `:catch_up` are owed, as by `tick/2`), so such a zone needs no
  timer at each tick: it counts what fell due whenever it is asked.
  Anywhere else nothing changes, as a tick's timer runs it
  (`tick_at/3`). The first call only starts the count.
  """
  @spec due(State.t(), integer(), non_neg_integer()) :: State.t()
  def due(%State{game: %__MODULE__{at: nil} = game} = state, index, _roll),
    do: %{state | game: %{game | at: index}}

  def due(
        %State{watched: false, game: %__MODULE__{spec: %{hooks: %{catch_up: true}}}} = state,
        index,
        roll
      ) do
    %{game: %__MODULE__{spec: spec, owed: owed, at: at} = game} = state

    if index > at do
      owed = owed + index - at
      state = %{state | game: %{game | owed: owed, roll: roll, at: index}}
      if owed >= spec.catch_up, do: settle(state), else: state
    else
      state
    end
  end

  def due(state, _index, _roll), do: state

  @doc """
  Tick `index` of the game's clock: its timer went off. Where the zone
  counts ticks owed (`due/3`), it counts; otherwise it runs the ticks
  owed, and those its timer missed, and then this one's `tick/2`, once:
  a tick already run (a timer that went off late, after the next) is
  not run again.
  """
  @spec tick_at(State.t(), integer(), non_neg_integer()) :: State.t()
  def tick_at(
        %State{watched: false, game: %__MODULE__{spec: %{hooks: %{catch_up: true}}}} = state,
        index,
        roll
      ),
      do: due(state, index, roll)

  def tick_at(%State{game: %__MODULE__{at: at} = game} = state, index, roll)
      when at == nil or index > at do
    missed = if at == nil, do: 0, else: index - at - 1

    game =
      if missed > 0 and is_map_key(game.spec.hooks, :catch_up),
        do: %{game | owed: game.owed + missed, roll: roll},
        else: game

    tick(%{state | game: %{game | at: index}}, roll)
  end

  def tick_at(state, _index, _roll), do: state

  @doc """
  The index of the tick whose timer the zone sets next, at tick `index`
  of the game's clock: the next one; in a zone that counts ticks owed
  (`due/3`), the one at which it owes `:catch_up` of them.
  """
  @spec next_tick(State.t(), integer()) :: integer()
  def next_tick(
        %State{
          watched: false,
          game: %__MODULE__{spec: %{hooks: %{catch_up: true}} = spec, at: at, owed: owed}
        },
        index
      )
      when at != nil,
      do: max(at + spec.catch_up - owed, index + 1)

  def next_tick(_state, index), do: index + 1

  @doc """
  The ticks this zone owes, run now in one `catch_up/3` (with the last
  owed tick's random integer): before a viewer's snapshot, an action, a
  join or a leave, a handover or a sleep. A zone that owes none is left
  as it is.
  """
  @spec settle(State.t()) :: State.t()
  def settle(%State{game: %__MODULE__{owed: owed, roll: roll, spec: spec} = game} = state)
      when owed > 0 do
    state = %{state | game: %{game | owed: 0}}
    hook(state, spec, :catch_up, [state, owed, roll], 0)
  end

  def settle(state), do: state

  @doc "The ticks this zone owes (see `tick/2`)."
  @spec owed(State.t()) :: non_neg_integer()
  def owed(%State{game: %__MODULE__{owed: owed}}), do: owed
  def owed(_state), do: 0

  @doc "An entity came in (placed, arrived, restored): viewers learn its look with it."
  @spec arrived(State.t(), Entity.t()) :: State.t()
  def arrived(%State{watched: true, game: %__MODULE__{} = game} = state, %Entity{look: look} = e)
      when look != 0,
      do: %{state | game: %{game | looks: Map.put(game.looks, e.id, look)}}

  def arrived(state, _entity), do: state

  # A hook's effects, applied; a hook that fails changes nothing.
  defp hook(state, spec, callback, args, who) do
    module = spec.module

    try do
      apply(module, callback, args)
    catch
      kind, reason -> fail(state, module, callback, kind, reason, __STACKTRACE__)
    else
      effects when is_list(effects) ->
        case apply_effects(state, effects, who, nil) do
          {:ok, state, _actor_attrs} -> state
          {:failed, state} -> state
        end

      other ->
        fail(state, module, callback, :error, {:bad_return, other}, [])
    end
  end

  ## Actions

  @doc """
  One action of entity `id`, asked by `owner` and forwarded `hops` times
  already. Decided here: `{:acted, outcome, state}`. Otherwise `{:pending,
  effects, state}`: it runs in the zone of its target, waits behind the
  entity's handoff or action, or follows the entity to the zone the
  directory names.
  """
  @spec act(
          State.t(),
          Entity.id(),
          request(),
          pid(),
          term(),
          non_neg_integer(),
          integer(),
          Handoff.locate()
        ) :: {:acted, outcome(), State.t()} | {:pending, [Handoff.effect()], State.t()}
  def act(%State{game: nil} = state, _id, _request, _owner, _tag, _hops, _now, _locate),
    do: {:acted, {:rejected, :disabled}, state}

  def act(%State{} = state, id, request, owner, tag, hops, now, locate) do
    case state.entities do
      %{^id => %Entity{owner: ^owner} = entity} ->
        if State.away?(state, id) do
          case State.defer(state, id, {:act, request, owner, tag}) do
            {:ok, state} -> {:pending, [], state}
            {:error, :busy} -> {:acted, {:rejected, :busy}, state}
          end
        else
          case State.pace(state, entity, now) do
            {:ok, entity, state} -> aim_and_act(state, entity, request, owner, tag, now)
            :limited -> {:acted, {:rejected, :rate_limited}, state}
          end
        end

      %{^id => _other_owner} ->
        {:acted, {:rejected, :not_owner}, state}

      _ ->
        case Handoff.follow(state, id, hops, locate) do
          {:ok, to} ->
            forward = {:act, id, request, owner, tag, hops + 1}
            {:pending, [{:count, :forwards}, {:send, to, forward}], state}

          :error ->
            {:acted, {:rejected, :unknown_entity}, state}
        end
    end
  end

  defp aim_and_act(state, entity, {name, target, args}, owner, tag, now) do
    case aim(state, entity, target) do
      {:ok, {x, y} = cell, dir} ->
        act = %Act{name: name, actor: entity, target: cell, dir: dir, args: args}

        if State.inside?(state, x, y) do
          case run_act(state, act, false) do
            {:ok, data, state, _attrs} -> {:acted, {:ok, data}, state}
            {:refused, reason, state} -> {:acted, {:refused, reason}, state}
            {:failed, state} -> {:acted, {:rejected, :interrupted}, state}
          end
        else
          to = Grid.zone_of(state.grid, x, y)
          state = State.start_acting(state, entity.id, to, owner, tag, now)
          message = {:act_at, act, state.index, owner, tag}
          {:pending, [{:count, :acts_across}, {:send, to, message}], state}
        end

      {:error, reason} ->
        {:acted, {:rejected, reason}, state}
    end
  end

  # The cell an action aims at: the actor's, a step away in a direction, or
  # a cell given outright that must be one of those.
  defp aim(_state, %Entity{x: x, y: y}, :here), do: {:ok, {x, y}, :here}

  defp aim(state, %Entity{x: x, y: y}, direction) when Grid.is_direction(direction) do
    {tx, ty} = Grid.step({x, y}, direction)
    inside_world(state, tx, ty, direction)
  end

  defp aim(state, %Entity{x: x, y: y}, {tx, ty}) when is_integer(tx) and is_integer(ty) do
    case {tx - x, ty - y} do
      {0, 0} -> {:ok, {x, y}, :here}
      {dx, dy} when dx in -1..1 and dy in -1..1 -> inside_world(state, tx, ty, direction(dx, dy))
      _far -> {:error, :out_of_reach}
    end
  end

  defp aim(_state, _entity, _target), do: {:error, :out_of_reach}

  defp inside_world(%State{grid: grid, rules: rules}, x, y, dir) do
    cond do
      Grid.in_bounds?(grid, x, y) -> {:ok, {x, y}, dir}
      rules.bounds -> {:error, :out_of_bounds}
      true -> {:ok, Grid.wrap(grid, x, y), dir}
    end
  end

  defp direction(0, -1), do: :n
  defp direction(1, -1), do: :ne
  defp direction(1, 0), do: :e
  defp direction(1, 1), do: :se
  defp direction(0, 1), do: :s
  defp direction(-1, 1), do: :sw
  defp direction(-1, 0), do: :w
  defp direction(-1, -1), do: :nw

  @doc """
  An action that zone `from` sent here, its target being one of this
  zone's cells: run with the copy of the actor it carries; the actor's new
  attributes go back with the outcome (`:same` when none).
  """
  @spec act_at(State.t(), Act.t(), Grid.zone_index(), pid(), term()) ::
          {[Handoff.effect()], State.t()}
  def act_at(%State{} = state, %Act{actor: actor, target: {x, y}} = act, from, owner, tag) do
    {outcome, attrs, state} =
      cond do
        state.game == nil ->
          {{:rejected, :disabled}, :same, state}

        not State.inside?(state, x, y) ->
          {{:rejected, :out_of_bounds}, :same, state}

        true ->
          case run_act(state, act, true) do
            {:ok, data, state, attrs} -> {{:ok, data}, attrs, state}
            {:refused, reason, state} -> {{:refused, reason}, :same, state}
            {:failed, state} -> {{:rejected, :interrupted}, :same, state}
          end
      end

    {[{:send, from, {:act_done, actor.id, tag, owner, outcome, attrs}}], state}
  end

  @doc """
  The answer to an action that ran in another zone: the actor's new
  attributes are set, the client is answered, and what waited is replayed.
  An answer nobody waits for any more (the action expired, or this zone
  restarted since) changes nothing here.
  """
  @spec act_done(State.t(), Entity.id(), term(), pid(), outcome(), term(), Handoff.env()) ::
          {[Handoff.effect()], State.t()}
  def act_done(%State{} = state, id, tag, owner, outcome, attrs, env) do
    case State.stop_acting(state, id) do
      {%{tag: ^tag}, deferred, state} ->
        state =
          case attrs do
            :same -> state
            attrs -> set_attrs(state, id, attrs, look(state.game.spec, attrs))
          end

        {replayed, state} = Handoff.replay(state, id, deferred, env)
        {[{:acted, owner, id, tag, outcome} | replayed], state}

      {nil, [], state} ->
        {[{:count, :acts_late}], state}
    end
  end

  @doc """
  Settles the actions running elsewhere that started before `cutoff`, or
  that were sent to a run of a zone that is gone (`lost` maps a zone to the
  epoch of the run that replaced it): answered `interrupted`, and what
  waited replayed.
  """
  @spec expire(
          State.t(),
          integer() | nil,
          %{Grid.zone_index() => non_neg_integer()},
          Handoff.env()
        ) ::
          {[Handoff.effect()], State.t()}
  def expire(%State{acting: acting} = state, _cutoff, _lost, _env) when map_size(acting) == 0,
    do: {[], state}

  def expire(%State{} = state, cutoff, lost, env) do
    ids =
      for {id, %{since: since, to: to, epoch: epoch}} <- state.acting,
          (cutoff != nil and since < cutoff) or
            (is_map_key(lost, to) and epoch < Map.fetch!(lost, to)),
          do: id

    Enum.reduce(ids, {[], state}, fn id, {effects, state} ->
      {%{owner: owner, tag: tag}, deferred, state} = State.stop_acting(state, id)
      {replayed, state} = Handoff.replay(state, id, deferred, env)
      interrupted = {:acted, owner, id, tag, {:rejected, :interrupted}}
      {effects ++ [{:count, :acts_expired}, interrupted | replayed], state}
    end)
  end

  # The game's `act/2`, its answer checked, its effects applied. `remote`:
  # the actor is a copy from another zone, whose attribute effects are
  # collected to be sent back rather than applied here.
  defp run_act(%State{game: %__MODULE__{spec: spec}} = state, %Act{} = act, remote) do
    module = spec.module
    state = settle(state)

    try do
      module.act(act, state)
    catch
      kind, reason -> {:failed, fail(state, module, :act, kind, reason, __STACKTRACE__)}
    else
      {:ok, data, effects} when is_list(effects) ->
        finish(state, module, act, data, effects, remote)

      {:ok, effects} when is_list(effects) ->
        finish(state, module, act, %{}, effects, remote)

      {:error, reason} when is_atom(reason) ->
        {:refused, reason, state}

      other ->
        {:failed, fail(state, module, :act, :error, {:bad_return, other}, [])}
    end
  end

  defp finish(state, module, act, data, effects, remote) do
    if Spec.data?(data) do
      actor = if remote, do: act.actor

      case apply_effects(state, effects, act.actor.id, actor) do
        {:ok, state, attrs} -> {:ok, data, state, attrs}
        {:failed, state} -> {:failed, state}
      end
    else
      {:failed, fail(state, module, :act, :error, {:bad_data, data}, [])}
    end
  end

  ## Effects

  # All or nothing: applied to the state in order, or, when one is
  # malformed or a callback they call fails, none (the state as it was,
  # with the failure). `actor`: a copy of an actor acting from another
  # zone, whose attributes are collected (the last set wins).
  defp apply_effects(state, [], _who, _actor), do: {:ok, state, :same}

  defp apply_effects(%State{game: %__MODULE__{spec: spec}} = state, effects, who, actor) do
    {state, attrs} = Enum.reduce(effects, {state, :same}, &apply_effect(&2, &1, who, actor))
    {:ok, state, attrs}
  catch
    {:bad_effect, why} ->
      {:failed, fail(state, spec.module, :effects, :error, why, [])}

    kind, reason ->
      {:failed, fail(state, spec.module, :effects, kind, reason, __STACKTRACE__)}
  end

  defp apply_effect({state, attrs}, {:cell, {x, y}, value}, _who, _actor)
       when is_integer(x) and is_integer(y) do
    unless State.inside?(state, x, y),
      do: throw({:bad_effect, {:cell_outside_zone, {x, y}}})

    {put_layer(state, Grid.cell_key(state.grid, x, y), value, true), attrs}
  end

  defp apply_effect({state, _attrs}, {:attrs, id, new}, _who, %Entity{id: id}),
    do: {state, new}

  defp apply_effect({state, attrs}, {:attrs, id, new}, _who, _actor) do
    if is_map_key(state.entities, id) and not State.away?(state, id),
      do: {set_attrs(state, id, new, look(state.game.spec, new)), attrs},
      else: throw({:bad_effect, {:entity_not_in_zone, id}})
  end

  defp apply_effect({state, attrs}, {:event, {x, y}, name, data}, who, _actor)
       when is_integer(x) and is_integer(y) and is_atom(name) do
    cond do
      not State.inside?(state, x, y) -> throw({:bad_effect, {:event_outside_zone, {x, y}}})
      # Players' lines (`Zone.Chat`): a client takes a `chat` event for one.
      name == :chat -> throw({:bad_effect, {:reserved_event, :chat}})
      not Spec.data?(data) -> throw({:bad_effect, {:bad_event_data, data}})
      true -> {State.event(state, who, {x, y}, name, data), attrs}
    end
  end

  defp apply_effect({%State{game: game} = state, attrs}, {:tally, board, key, delta}, _who, _a)
       when is_atom(board) and (is_integer(key) or is_binary(key)) and is_integer(delta),
       do: {%{state | game: %{game | tallies: [{board, key, delta} | game.tallies]}}, attrs}

  defp apply_effect(_acc, effect, _who, _actor), do: throw({:bad_effect, {:unknown, effect}})

  defp put_layer(%State{game: game} = state, key, value, record?) do
    %__MODULE__{spec: spec} = game

    layer =
      if value == nil, do: Map.delete(game.layer, key), else: Map.put(game.layer, key, value)

    code = if value == nil, do: 0, else: code!(spec, :show, value)

    walk =
      case value != nil and walk(spec, value) do
        blocks when value != nil and is_boolean(blocks) -> Map.put(game.walk, key, blocks)
        _nothing_or_ground -> Map.delete(game.walk, key)
      end

    old = Map.get(game.codes, key, 0)
    codes = if code == 0, do: Map.delete(game.codes, key), else: Map.put(game.codes, key, code)
    game = %{game | layer: layer, codes: codes, walk: walk, ticking: ticking(game, key, value)}

    game = if record?, do: %{game | cells_out: Map.put(game.cells_out, key, true)}, else: game

    game =
      if record? and state.watched and code != old,
        do: %{game | shown: Map.put(game.shown, key, code)},
        else: game

    %{state | game: game}
  end

  # Whether a value blocks the cell (`true`), frees it (`false`) or
  # leaves it to the ground (`nil`), by the game's `blocks/1`.
  defp walk(%Spec{hooks: hooks, module: module}, value) do
    if is_map_key(hooks, :blocks) do
      case module.blocks(value) do
        blocks when is_boolean(blocks) or blocks == nil -> blocks
        other -> throw({:bad_effect, {:bad_blocks, other}})
      end
    end
  end

  # Whether a tick may change the cell, kept for a game with `ticks?/1`.
  defp ticking(%__MODULE__{spec: %{hooks: %{ticks?: true}} = spec, ticking: ticking}, key, value) do
    if value != nil and ticks?(spec, value),
      do: Map.put(ticking, key, true),
      else: Map.delete(ticking, key)
  end

  defp ticking(%__MODULE__{ticking: ticking}, _key, _value), do: ticking

  defp ticks?(%Spec{hooks: %{ticks?: true}, module: module}, value) do
    case module.ticks?(value) do
      ticks? when is_boolean(ticks?) -> ticks?
      other -> throw({:bad_effect, {:bad_ticks?, other}})
    end
  end

  defp ticks?(_spec, _value), do: false

  defp set_attrs(%State{game: game} = state, id, attrs, look) do
    %{^id => %Entity{look: old}} = state.entities
    state = State.put_attrs(state, id, attrs, look)
    game = %{game | entities_out: Map.put(game.entities_out, id, true)}

    game =
      if state.watched and look != old,
        do: %{game | looks: Map.put(game.looks, id, look)},
        else: game

    %{state | game: game}
  end

  defp look(%Spec{hooks: %{look: true}} = spec, attrs) when attrs != nil,
    do: code!(spec, :look, attrs)

  defp look(_spec, _attrs), do: 0

  defp code!(%Spec{hooks: hooks, module: module}, callback, term) do
    if is_map_key(hooks, callback) do
      case apply(module, callback, [term]) do
        code when is_integer(code) and code >= 0 and code <= 255 -> code
        other -> throw({:bad_effect, {:"bad_#{callback}", other}})
      end
    else
      0
    end
  end

  defp fail(%State{game: game} = state, module, callback, kind, reason, stacktrace) do
    failure = {module, callback, kind, reason, Enum.take(stacktrace, 5)}
    %{state | game: %{game | failures: [failure | game.failures]}}
  end

  ## Views

  @doc "The visible cells and looks that changed since the last flush."
  @spec flush(State.t()) ::
          {[{non_neg_integer(), non_neg_integer(), byte()}], [{Entity.id(), byte()}], State.t()}
  def flush(%State{game: nil} = state), do: {[], [], state}

  def flush(%State{game: %__MODULE__{shown: shown, looks: looks}} = state)
      when map_size(shown) == 0 and map_size(looks) == 0,
      do: {[], [], state}

  def flush(%State{game: game, grid: grid} = state) do
    cells =
      for {key, code} <- game.shown do
        {x, y} = Grid.cell_of_key(grid, key)
        {x, y, code}
      end

    looks = for {id, look} <- game.looks, is_map_key(state.entities, id), do: {id, look}
    {cells, looks, %{state | game: %{game | shown: %{}, looks: %{}}}}
  end

  @doc "True when a visible cell or a look changed since the last flush."
  @spec pending?(State.t()) :: boolean()
  def pending?(%State{game: nil}), do: false

  def pending?(%State{game: %__MODULE__{shown: shown, looks: looks}}),
    do: map_size(shown) > 0 or map_size(looks) > 0

  @doc "Every visible cell and every entity's look other than 0, for a snapshot."
  @spec snapshot(State.t()) :: %{cells: list(), looks: list(), events: []}
  def snapshot(%State{} = state) do
    looks = for {id, %Entity{look: look}} <- state.entities, look != 0, do: {id, look}
    %{cells: cells(state), looks: looks, events: []}
  end

  @doc "Every visible cell as `{x, y, code}` (none without a game)."
  @spec cells(State.t()) :: [{non_neg_integer(), non_neg_integer(), 1..255}]
  def cells(%State{game: nil}), do: []

  def cells(%State{game: game, grid: grid}) do
    for {key, code} <- game.codes do
      {x, y} = Grid.cell_of_key(grid, key)
      {x, y, code}
    end
  end

  @doc "Nobody watches any more: what was kept for the next delta goes."
  @spec unwatched(State.t()) :: State.t()
  def unwatched(%State{game: nil} = state), do: state
  def unwatched(%State{game: game} = state), do: %{state | game: %{game | shown: %{}, looks: %{}}}

  ## Output

  @doc """
  What the zone process must carry out after an operation: layer rows to
  write (`rows/1`'s; a `nil` value: delete), entities whose look and attributes to
  write, tallies to send, failures to log; `nil` when nothing.
  """
  @spec take_output(State.t()) :: {output() | nil, State.t()}
  def take_output(%State{game: nil} = state), do: {nil, state}

  def take_output(
        %State{game: %__MODULE__{cells_out: c, entities_out: e, tallies: [], failures: []}} =
          state
      )
      when map_size(c) == 0 and map_size(e) == 0,
      do: {nil, state}

  def take_output(%State{game: game} = state) do
    output = %{
      cells: for({key, true} <- game.cells_out, do: row(game, key)),
      entities: for({id, true} <- game.entities_out, entity = state.entities[id], do: entity),
      tallies: Enum.reverse(game.tallies),
      failures: Enum.reverse(game.failures)
    }

    game = %{game | cells_out: %{}, entities_out: %{}, tallies: [], failures: []}
    {output, %{state | game: game}}
  end
end
