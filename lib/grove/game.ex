defmodule Grove.Game do
  @moduledoc """
  A game: what players and actors can do in a world besides walking, and
  the world state their doing changes.

  A game is a module the zones call, not a process of its own. Every
  callback runs inside the zone that owns the cells and entities it
  concerns, in the zone's pure core, between two messages: so each rule is
  applied by the single writer of its area, with no lock and no call to
  another zone, and what it changes travels with entities between zones,
  with zones between nodes, and is saved with the zone.

  A world runs one game, chosen in its options (`game: {MyGame, options}`,
  see `Grove.World`) and for `make run` by `GROVE_GAME` (see
  `config/runtime.exs`). `Grove.Games.Orchard` is the one that ships.

  ## What a game adds to a world

    * **Actions.** A player (the `act` message, `docs/protocol.md`) or any
      client (`Grove.World.act/6`) asks for an action by name, toward a
      target: its own cell (`:here`), a direction, or an adjacent cell,
      with small arguments the game declares in `actions/0`. The zone that
      holds the target cell calls `act/2`, which answers data for the
      client and the effects to apply, or a reason to refuse. Every
      action gets exactly one outcome, like a move.
    * **A cell layer** over the static terrain: one value per cell (any
      term; `nil`, the default, is nothing), first given by `cell/3` and
      changed by effects. A value may block a cell or free one the
      terrain blocks (`blocks/1`), and may be shown to players
      (`show/1`).
    * **Attributes**: one small term per entity (`nil` until the game sets
      it), changed by effects, travelling with the entity. A code of it
      may be shown (`look/1`).
    * **Hooks**: `join/3` and `leave/2` as entities come and go,
      `enter/2` as one steps onto a cell, `tick/2` every `:tick`
      milliseconds in every zone (up to a quarter of it late where one
      viewer watches; see "When a tick runs").
    * **Events**: short messages to the players who see a cell (a sound,
      a splash), published with the zone's next view like its moves.
    * **Tallies**: numbers kept world-wide, such as a leaderboard, added
      to from any zone and kept in the store (`Grove.Game.Tally`).

  ## Callbacks

  Required:

    * `actions/0` - the actions and their arguments:
      `%{pick: [], throw: [power: {:integer, 1, 3}]}`; see "Arguments".
    * `act/2` - one action: from a `Grove.Game.Act` (who acts, toward
      which cell, with which arguments) and the `Grove.Game.Area` around
      the target, `{:ok, data, effects}` (or `{:ok, effects}`, with no
      data) or `{:error, reason}`, an atom the player is told (`refused`).

  Optional (a game leaves out what it does not use, and costs nothing
  for it):

    * `init/1` - the game's configuration from its options (default: the
      options as given); raise `ArgumentError` on a bad one. Callbacks
      read it with `Grove.Game.Area.config/1`.
    * `cell/3` - the layer's first value for a cell, from its coordinates,
      its ground and the configuration (default `nil` everywhere). Called
      for every cell of a zone when the zone first starts with nothing
      saved, so it must be cheap and deterministic: derive randomness from
      the coordinates (`:erlang.phash2/2`).
    * `join/3` - an entity joined, with what its client said of it (for a
      player, `%{account: id, name: name}`); its attributes are `nil`
      until an effect sets them.
    * `leave/2` - an entity is about to go (it left, or its client died):
      the last chance to put what it held back into the world.
    * `enter/2` - an entity has just stepped onto a cell (a move, or an
      arrival from another zone), given as it stands there.
    * `enter_cells/0` - which cells `enter/2` is called on: `:all` (the
      default), or `:layer`, only those whose layer holds a value. A step
      is the world's hot path: a game whose `enter/2` does nothing where
      the layer is `nil` (the orchard's picks up what lies there) says
      `:layer`, and the zones skip the call on every other step.
    * `tick/2` - every `:tick` milliseconds (the game's option, default
      `1000`) in every zone, with a random integer: regrowth, decay (see
      "When a tick runs" for when exactly).
    * `catch_up/3` - several ticks at once, `catch_up(area, ticks, roll)`:
      a game that has it lets the zones nobody watches owe their ticks
      and run them together (see "Ticks nobody watches").
    * `ticks?/1` - whether a tick may change a cell holding this value
      (default: any value may). A tick that reads the cells it may change
      through `Grove.Game.Area.ticking/1` gets those alone, kept by the
      zone as the layer changes, where `Grove.Game.Area.cells/1` lists
      every cell with a value: the orchard's ticks, in every watched zone
      every second, look at its trees short of apples and its grazed
      flowers, not at every tree, basket and apple on the ground.
    * `show/1` - what players see of a cell's value: `0` nothing, or a
      code from 1 to 255 that `legend/0` explains (default `0`).
    * `look/1` - what players see of an entity's attributes, likewise.
    * `blocks/1` - whether a cell's value blocks movement (`true`), frees
      a cell whose ground blocks (`false`, a bridge), or leaves it to the
      ground (`nil`, the default).
    * `legend/0` - how clients draw and describe the game (`GET /game`):
      a map with `:title`, `:help`, `:cells` and `:looks` (codes to
      `%{name, emoji}`), `:actions` (name to `%{key, label, emoji}`),
      `:events` (name to emoji) and `:reasons` (refusal to a sentence).
    * `version/0` and `upgrade/3` - the shape of cell values and
      attributes, for live reload: a reloaded game whose version changed
      has every value and attribute passed through
      `upgrade(:cell | :attrs, term, old_version)`, or, without
      `upgrade/3`, is refused and the running world keeps the old code
      (`Grove.Reloader`).

  Every callback must be pure: no messages, no clock, no process
  dictionary, no funs in the state (live reload replaces the code they
  would point to). Randomness comes in as integers.

  ## Ticks nobody watches

  Most zones of a big world have nobody looking at them, and a tick in
  each of them every second, with its writes and saves, is most of what a
  game costs. A game that defines `catch_up/3` lets them wait: a zone
  nobody watches counts its ticks instead of running them (on the game's
  clock, whenever it is asked: it has no timer at each tick), and runs those
  it owes in one `catch_up(area, ticks, roll)` call (`roll` the last owed
  tick's random integer)

    * before anything that reads or changes the game's state in the zone:
      a viewer's snapshot (someone comes to look), an action whose target
      is in the zone, a `join/3` or `leave/2`, a handover or a sleep;
    * when it owes `:catch_up` ticks (the game's option, default `10`),
      so that what is saved and what actors sense lags little;
    * and before the tick that falls due once the zone is watched.

  So whoever looks, or acts, finds the zone as if every tick had run, on
  two promises the game makes by defining `catch_up/3`:

    * `catch_up(area, n, roll)` gives the state that `n` calls of
      `tick/2` in a row would give, in law: each outcome with the chance
      it would have after `n` ticks (a growth rule can draw it at once:
      a tree short of apples gains the successes of `n` tries, capped);
      and `catch_up(area, 1, roll)` is `tick(area, roll)`;
    * what its ticks change, moves and `enter/2` do not read: a tick
      does not change what blocks, nor what `enter/2` looks at (an
      entity steps in without the zone catching up).

  What is read without asking the zone may lag by the ticks it owes: the
  cells actors sense, `Grove.World.cell/2`, the periodic save (after a
  crash, a zone comes back as it was saved, as without owed ticks). A
  game without `catch_up/3` has every tick run on its timer, in every
  zone (for a zone with one viewer, see "When a tick runs").

  ## When a tick runs

  A zone that more than one player watches, or (without `catch_up/3`)
  that nobody watches, runs each tick on its timer, when it falls due. A zone with one viewer sets the timer a quarter of
  `:tick` after the tick falls due, and a move of that viewer's made
  meanwhile runs the tick first, in its own turn, then the move: it
  saves the zone a turn of its own for the tick. So in such a zone a tick
  may run up to a quarter interval late (250 ms for a tick a second):
  till it runs, actions whose target is in the zone, `enter/2`, actors' senses and `Grove.World.cell/2` find
  the zone as before the tick. A neighbouring zone the viewer watches
  without standing in it waits for its timer, and so do the moves of
  other entities there (actors, players who do not view) made
  meanwhile: they find the zone as before the tick. A move of the viewer
  itself comes after the tick: it runs the tick before it steps, and
  what the tick changed goes out before that move's outcome.

  In a world of zones on demand, what ticks alone changed is not saved:
  a zone whose layer no action, join, leave or step changed since the
  game laid it (or since its last save) falls asleep without writing it,
  and wakes with it laid anew by `cell/3` (or as last saved), as if those
  ticks had not run; the game does not tick while its zone sleeps
  either. A change by anything else is saved, with every tick's change
  since.

  ## Effects

  What `act/2` and the hooks return, applied in order once the callback
  has returned:

    * `{:cell, {x, y}, value}` - the cell's layer value becomes `value`
      (`nil` clears it);
    * `{:attrs, id, attrs}` - entity `id`'s attributes become `attrs`;
    * `{:event, {x, y}, name, data}` - tells the players who see the cell
      (`name` an atom, `data` a small map as for arguments; `:chat` is
      the players' lines, not a game's: an effect that names it fails);
    * `{:tally, board, key, delta}` - adds `delta` to `key`'s total on the
      world-wide `board` (an atom); `key` an integer or a string.

  An action's effects may change the actor's attributes and anything in
  the zone that holds its target cell; a hook's, anything in its zone.
  An effect on a cell or an entity elsewhere is a bug in the game, handled
  as a crash (below).

  ## Arguments and data

  Arguments are declared per action as `name: type`, where a type is
  `{:integer, min, max}`, `{:string, max_bytes}`, `:boolean`,
  `{:one_of, [atom]}`, or `{:optional, type, default}`. They reach
  `act/2` as a map with the declared names as atoms, checked: an action
  with an unknown name, a missing or unknown argument, or one of the wrong
  type or size is refused before any zone sees it (`Grove.Game.check/3`
  says why). Data for the client (`act/2`'s, an event's) is a map of
  names to integers (32-bit), strings (at most 255 bytes) and booleans,
  at most 16 of them.

  ## Failure

  A callback that raises, throws, exits or answers something malformed
  costs one action, not the world: the zone answers the action
  `interrupted`, applies none of its effects (it has not applied any:
  effects are applied only after the callback returns), logs one line
  naming the game's module and callback (at most one every ten seconds a
  node, with the count of those not logged), counts it in
  `grove_game_failures_total`, and carries on with its state as it was.
  A hook that fails changes nothing, the same way. See docs/decisions.md,
  "A game's failing callback costs one action", for why the zone does not
  restart.

  ## Example

      defmodule Apples do
        @behaviour Grove.Game
        alias Grove.Game.{Act, Area}

        @impl true
        def actions, do: %{pick: []}

        # Every tree starts with an apple.
        @impl true
        def cell(_cell, :tree, _config), do: 1
        def cell(_cell, _ground, _config), do: nil

        @impl true
        def act(%Act{name: :pick, actor: actor, target: target}, area) do
          case Area.cell(area, target) do
            n when is_integer(n) and n > 0 ->
              carried = (actor.attrs || 0) + 1
              {:ok, %{carrying: carried}, [{:cell, target, n - 1}, {:attrs, actor.id, carried}]}

            _ ->
              {:error, :no_apple}
          end
        end

        @impl true
        def show(n) when is_integer(n) and n > 0, do: 1
        def show(_value), do: 0
      end
  """

  alias Grove.Game.{Act, Area}
  alias Grove.World.{Entity, Grid, Terrain}

  @typedoc "The game's configuration, as `init/1` made it from its options."
  @type config :: term()

  @typedoc "A cell's layer value: any term, `nil` for nothing."
  @type value :: term()

  @typedoc "An entity's attributes: any small term, `nil` until set."
  @type attrs :: term()

  @typedoc "Small data for clients: names to integers, strings or booleans."
  @type data :: %{optional(atom() | String.t()) => integer() | String.t() | boolean()}

  @type effect ::
          {:cell, Grid.cell(), value()}
          | {:attrs, Entity.id(), attrs()}
          | {:event, Grid.cell(), atom(), data()}
          | {:tally, atom(), integer() | String.t(), integer()}

  @typedoc "How an argument is checked."
  @type arg_type ::
          {:integer, integer(), integer()}
          | {:string, pos_integer()}
          | :boolean
          | {:one_of, [atom()]}
          | {:optional, arg_type(), term()}

  @callback actions() :: %{atom() => [{atom(), arg_type()}]}
  @callback act(Act.t(), Area.t()) ::
              {:ok, data(), [effect()]} | {:ok, [effect()]} | {:error, atom()}
  @callback init(options :: keyword()) :: config()
  @callback cell(Grid.cell(), Terrain.kind(), config()) :: value()
  @callback join(Entity.t(), info :: map(), Area.t()) :: [effect()]
  @callback leave(Entity.t(), Area.t()) :: [effect()]
  @callback enter(Entity.t(), Area.t()) :: [effect()]
  @callback enter_cells() :: :all | :layer
  @callback tick(Area.t(), roll :: non_neg_integer()) :: [effect()]
  @callback catch_up(Area.t(), ticks :: pos_integer(), roll :: non_neg_integer()) :: [effect()]
  @callback ticks?(value()) :: boolean()
  @callback show(value()) :: 0..255
  @callback look(attrs()) :: 0..255
  @callback blocks(value()) :: boolean() | nil
  @callback legend() :: map()
  @callback version() :: non_neg_integer()
  @callback upgrade(:cell | :attrs, term(), from :: non_neg_integer()) :: term()

  @optional_callbacks init: 1,
                      cell: 3,
                      join: 3,
                      leave: 2,
                      enter: 2,
                      enter_cells: 0,
                      tick: 2,
                      catch_up: 3,
                      ticks?: 1,
                      show: 1,
                      look: 1,
                      blocks: 1,
                      legend: 0,
                      version: 0,
                      upgrade: 3

  @doc """
  Checks an action's name and arguments against a game's `actions/0`:
  the action's name as an atom and its arguments as a map of atoms, with
  defaults filled in, or why not (`:unknown_action`, or `:bad_args` with
  a sentence naming the argument). Names may be atoms or strings (as
  they come off the wire); no atom is ever created.
  """
  defdelegate check(game, name, args), to: Grove.World.Game.Spec

  @doc """
  True when `data` may go to a client: a map of at most 16 atom or
  string names to 32-bit integers, strings of at most 255 bytes and
  booleans.
  """
  defdelegate data?(data), to: Grove.World.Game.Spec
end
