defmodule Grove.Actor do
  @moduledoc """
  A kind of AI actor: how one actor decides where to step next.

  A kind is a module with a few callbacks; `Grove.Actors` hosts any number
  of kinds side by side, each with as many actors as configured, and does
  everything else for them: joining the world, the schedule (one step per
  `:interval` with jitter), sending the moves through the public client
  API (`Grove.World.move_many/2`) and counting their outcomes, shedding
  moves when the world falls behind. A kind never sends a message nor
  reads a clock: its `step/3` is a pure function from what the actor
  senses and its own state to a direction (or `:stay`) and the next
  state, so a kind is tested without a world (`Grove.Actor.Senses.new/1`).

  ## Callbacks

    * `init/2` - an actor's first state, from the kind's options (those
      given with it in `Grove.Actors`' `:kinds`) and a random integer;
      called once per actor as it joins, and once with every kind's
      options when the actors start, where an `ArgumentError` it raises
      stops them with its message
    * `step/3` - the next step: from the actor's state, what it senses
      (`nil` for a kind that senses nothing) and a random integer in
      `0..roll_max()`, to `{direction, state}`, `{:stay, state}`, or, in
      a world with a game (`Grove.Game`), an action:
      `{{:act, action, target}, state}` or `{{:act, action, target, args},
      state}`, with `target` `:here` or a direction (its outcome is
      counted like a move's; the kind learns of it by what it senses next)
    * `senses/0` (optional) - what the kind senses: `[]` for nothing (the
      default), `[radius: r]` for the ground within `r` cells, and
      `[radius: r, entities: true]` for the entities there too (`r` in
      1..16); `game: true` adds the game's cell layer and the actor's own
      attributes (`Grove.Actor.Senses.cell/2`)
    * `name/0` (optional) - a short name for metrics, the status line and
      the dashboard (default: the module's last part, in lower case)
    * `emoji/0` (optional) - how players see it (default `""`: each actor
      a face of its own, picked by the client from its id)
    * `version/0` and `upgrade/2` (optional) - the shape of the kind's
      state, for live reload (`Grove.Reloader`): a kind reloaded with
      another version has each actor's state passed through
      `upgrade(state, old_version)`; without `upgrade/2` the reload is
      refused (default version `0`)

  Randomness comes in as integers the herd draws (from its own generator,
  with the draw it makes for the schedule anyway), so an actor's state
  holds no generator and a step can be replayed.

  ## What sensing costs

  A kind that senses nothing gets `nil` and costs its herd nothing beyond
  calling `step/3`. One that senses reads its own cell from the zone's ETS
  table before each step, the ground from the terrain (a binary in
  `:persistent_term`), and with `entities: true` scans the ETS tables of
  the zones its radius reaches (`Grove.World.nearby/3`). No zone is ever
  sent a message for it. Reading the cell is well under a microsecond;
  the scan costs in proportion to the entities of those zones: about
  15 µs at the default world's 50 entities a zone, some 200 µs at 625
  (docs/benchmarks.md, "What sensing reads cost"). Ask for entities only
  if the kind uses them, and keep the radius within a zone.

  ## Example

  A kind takes a few lines. This one is a hare: it runs from any other
  entity it sees within its shyness (two cells unless configured), and
  nibbles in place otherwise.

      defmodule MyGame.Hare do
        @behaviour Grove.Actor

        alias Grove.Actor.Senses
        alias Grove.World.Grid

        @impl true
        def init(opts, _roll), do: %{shyness: Keyword.get(opts, :shyness, 2)}

        @impl true
        def senses, do: [radius: 2, entities: true]

        @impl true
        def emoji, do: "🐇"

        @impl true
        def step(state, %Senses{at: {x, y}} = senses, roll) do
          near = for {_id, ex, ey, _kind} <- senses.entities,
                     max(abs(ex - x), abs(ey - y)) <= state.shyness,
                     do: {ex, ey}

          case near do
            [] ->
              {:stay, state}

            [{ex, ey} | _] ->
              # Away from the first one it saw: the step that most widens the gap.
              away = Enum.max_by(Grid.directions(), fn direction ->
                {nx, ny} = Grid.step({x, y}, direction)
                if Senses.free?(senses, {nx, ny}),
                  do: {abs(nx - ex) + abs(ny - ey), rem(roll, 3)},
                  else: {-1, 0}
              end)

              if Senses.free?(senses, Grid.step({x, y}, away)),
                do: {away, state},
                else: {:stay, state}
          end
        end
      end

  Then run a thousand of them beside the usual walkers, with options:

      Grove.Actors.start_link(
        name: MyActors,
        world: MyWorld,
        kinds: [{Grove.Actors.Walker, 10_000}, {MyGame.Hare, 1_000, shyness: 3}]
      )

  See `docs/actors.md` for a walk through writing and testing a kind.
  """

  alias Grove.Actor.Senses
  alias Grove.World.Grid

  @typedoc "What the kind keeps for one actor between steps; any term."
  @type state :: term()

  @typedoc "A random integer in `0..roll_max()`."
  @type roll :: non_neg_integer()

  @callback init(options :: keyword(), roll()) :: state()
  @typedoc "An action a kind asks for instead of a step: a game's action toward `:here` or a direction."
  @type act ::
          {:act, atom(), Grid.direction() | :here}
          | {:act, atom(), Grid.direction() | :here, map()}

  @callback step(state(), Senses.t() | nil, roll()) :: {Grid.direction() | :stay | act(), state()}
  @callback senses() :: keyword()
  @callback name() :: String.t()
  @callback emoji() :: String.t()
  @callback version() :: non_neg_integer()
  @callback upgrade(state(), from :: non_neg_integer()) :: state()

  @optional_callbacks senses: 0, name: 0, emoji: 0, version: 0, upgrade: 2

  @roll_bits 24
  @max_radius 16
  @directions List.to_tuple(Grid.directions())

  @typedoc "A kind as the herds use it, from `describe!/1`."
  @type description :: %{
          module: module(),
          name: String.t(),
          emoji: String.t(),
          version: non_neg_integer(),
          senses: nil | %{radius: pos_integer(), entities: boolean(), game: boolean()}
        }

  @doc "The largest random integer `init/2` and `step/3` are given."
  @spec roll_max() :: pos_integer()
  def roll_max, do: Bitwise.bsl(1, @roll_bits) - 1

  @doc false
  def roll_bits, do: @roll_bits

  @doc "The largest radius a kind may sense."
  @spec max_radius() :: pos_integer()
  def max_radius, do: @max_radius

  @doc """
  Checks that `module` is a kind and reads what it declares; raises
  `ArgumentError` saying what is wrong.
  """
  @spec describe!(module()) :: description()
  def describe!(module) when is_atom(module) do
    unless Code.ensure_loaded?(module),
      do: raise(ArgumentError, "actor kind #{inspect(module)} is not a module that exists")

    for {fun, arity} <- [init: 2, step: 3], not function_exported?(module, fun, arity) do
      raise ArgumentError,
            "actor kind #{inspect(module)} does not define #{fun}/#{arity} (see Grove.Actor)"
    end

    %{
      module: module,
      name: optional(module, :name, fn -> default_name(module) end),
      emoji: optional(module, :emoji, fn -> "" end),
      version: version(module),
      senses: senses!(module, optional(module, :senses, fn -> [] end))
    }
  end

  def describe!(other),
    do: raise(ArgumentError, "an actor kind is a module, got: #{inspect(other)}")

  @doc "The version of a kind's state (`version/0`, default 0)."
  @spec version(module()) :: non_neg_integer()
  def version(module), do: optional(module, :version, fn -> 0 end)

  defp optional(module, fun, default) do
    if function_exported?(module, fun, 0), do: apply(module, fun, []), else: default.()
  end

  defp default_name(module),
    do: module |> Module.split() |> List.last() |> Macro.underscore()

  defp senses!(_module, []), do: nil

  defp senses!(module, senses) when is_list(senses) do
    radius = senses[:radius]

    unless Keyword.keyword?(senses) and Keyword.keys(senses) -- [:radius, :entities, :game] == [] and
             is_integer(radius) and radius in 1..@max_radius and
             senses[:entities] in [nil, true, false] and senses[:game] in [nil, true, false] do
      raise ArgumentError,
            "#{inspect(module)}.senses/0 must be [] or [radius: 1..#{@max_radius}, entities: boolean, game: boolean], " <>
              "got: #{inspect(senses)}"
    end

    %{radius: radius, entities: senses[:entities] == true, game: senses[:game] == true}
  end

  defp senses!(module, other),
    do:
      raise(
        ArgumentError,
        "#{inspect(module)}.senses/0 must be a keyword list, got: #{inspect(other)}"
      )

  ## Helpers for kinds

  @doc """
  The direction of a heading, `0` north and clockwise by eighths (any
  integer: headings wrap around).

      iex> Grove.Actor.direction(2)
      :e
      iex> Grove.Actor.direction(-1)
      :nw
  """
  @spec direction(integer()) :: Grid.direction()
  def direction(heading), do: elem(@directions, Integer.mod(heading, 8))

  @doc """
  The direction of the step from one cell that goes most directly toward
  another, or `nil` when they are the same.

      iex> Grove.Actor.toward({5, 5}, {9, 2})
      :ne
      iex> Grove.Actor.toward({5, 5}, {5, 5})
      nil
  """
  @spec toward(Grid.cell(), Grid.cell()) :: Grid.direction() | nil
  def toward({x, y}, {tx, ty}) do
    case {sign(tx - x), sign(ty - y)} do
      {0, 0} -> nil
      {0, -1} -> :n
      {1, -1} -> :ne
      {1, 0} -> :e
      {1, 1} -> :se
      {0, 1} -> :s
      {-1, 1} -> :sw
      {-1, 0} -> :w
      {-1, -1} -> :nw
    end
  end

  @doc "The heading (`0..7`, north and clockwise) of a direction."
  @spec heading(Grid.direction()) :: 0..7
  def heading(:n), do: 0
  def heading(:ne), do: 1
  def heading(:e), do: 2
  def heading(:se), do: 3
  def heading(:s), do: 4
  def heading(:sw), do: 5
  def heading(:w), do: 6
  def heading(:nw), do: 7

  defp sign(0), do: 0
  defp sign(n) when n > 0, do: 1
  defp sign(_), do: -1
end
