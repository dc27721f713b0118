defmodule Grove.Game.Act do
  @moduledoc """
  One action, as `c:Grove.Game.act/2` is given it: its name, the actor,
  the cell it is aimed at and its arguments, checked against the game's
  `actions/0`.

    * `:name` - the action, an atom of `actions/0`
    * `:actor` - the acting entity as it is now (`Grove.World.Entity`:
      its `id`, cell `x` and `y`, `kind` and `attrs`); an action aimed
      across a zone border runs in the target's zone, where the actor is
      not in the area: read it from here
    * `:target` - the cell `{x, y}` aimed at: the actor's own or one next
      to it
    * `:dir` - the direction of the target from the actor, or `:here`
    * `:args` - the arguments, by the names `actions/0` declares
  """

  alias Grove.World.{Entity, Grid}

  @enforce_keys [:name, :actor, :target, :dir]
  defstruct [:name, :actor, :target, :dir, args: %{}]

  @type t :: %__MODULE__{
          name: atom(),
          actor: Entity.t(),
          target: Grid.cell(),
          dir: Grid.direction() | :here,
          args: map()
        }
end
