defmodule Grove.World.Client do
  @moduledoc """
  The client API as a behaviour: what an actor needs from a world.

  `Grove.World` implements it; so does the single-process baseline the actor
  bench compares against, which lets the very same actors walk either. A
  test double for a world is another implementation of this behaviour.

  Outcomes arrive as messages, never as return values:
  `{:grove_move, id, tag, {:ok, {x, y}} | {:rejected, reason}}` for a move,
  and for the moves of a batch either that or
  `{:grove_moves, [{id, tag, outcome}]}`; a game's actions, likewise,
  `{:grove_act, id, tag, outcome}` and `{:grove_acts, [{id, tag, outcome}]}`;
  a said line, `{:grove_say, id, tag, outcome}`. In a world of several nodes, a
  client whose entity was lost with a node is sent `{:grove_lost, id}`.
  """

  alias Grove.World.{Entity, Grid}

  @type world :: term()

  @callback join(world(), keyword()) :: {:ok, Entity.id(), Grid.cell()} | {:error, atom()}
  @callback move(world(), Entity.id(), Grid.direction(), tag :: term()) :: :ok
  @callback move_many(world(), [{Entity.id(), Grid.direction(), tag :: term()}]) :: :ok
  # The same, with options: `tally: true` has a zone answer `{:grove_moved,
  # answers}`, a move taken as asked by its tag alone (an integer), any
  # other `{id, tag, outcome}` (`Grove.World.move_many/3`). A world
  # without it is asked `move_many/2`.
  @callback move_many(world(), [{Entity.id(), Grid.direction(), tag :: term()}], keyword()) ::
              :ok
  @callback leave(world(), Entity.id()) :: :ok | {:error, atom()}
  @callback grid(world()) :: Grid.t()
  @callback terrain(world()) :: Grove.World.Terrain.t()

  # What actors that sense (see Grove.Actor) read; a world for actors that
  # sense nothing may leave them out.
  @callback position(world(), Entity.id()) :: Grid.cell() | nil
  @callback nearby(world(), Grid.cell(), non_neg_integer()) ::
              [{Entity.id(), non_neg_integer(), non_neg_integer(), byte()}]

  # The zone an entity stands in (nil for one the world does not know),
  # and whether anyone may watch a zone: herds rest their actors where
  # nobody does (`Grove.Actors`' `:unseen_every`), asking the second once
  # per zone in a batch of turns; a world without them is taken as watched
  # everywhere.
  @callback zone_index(world(), Entity.id()) :: Grid.zone_index() | nil
  @callback zone_watched?(world(), Grid.zone_index()) :: boolean()
  # The world read once for a batch of those two questions, which then
  # take it in the world's place (a world without it is asked as it is).
  @callback zones_now(world()) :: world()

  # How many entities of each kind code are in the world, for per-kind counts.
  @callback kind_counts(world()) :: %{byte() => pos_integer()}

  # A game's actions (Grove.Game), for actor kinds that play it, and what
  # they sense of it.
  @callback act(world(), Entity.id(), atom() | String.t(), term(), map(), tag :: term()) :: :ok
  @callback act_many(world(), [{Entity.id(), atom() | String.t(), term(), map(), tag :: term()}]) ::
              :ok
  # Moves and actions at once, a zone's of both in one message and one
  # answer, `{:grove_steps, outcomes}` (`Grove.World.step_many/3`).
  @callback step_many(
              world(),
              [{Entity.id(), Grid.direction(), tag :: term()}],
              [{Entity.id(), atom() | String.t(), term(), map(), tag :: term()}]
            ) :: :ok
  @callback game_near(world(), Grid.cell(), non_neg_integer()) ::
              {%{Grid.cell() => term()}, %{Grid.cell() => boolean()}}
  @callback attrs(world(), Entity.id()) :: {term(), byte()} | nil

  # A line said by an entity to those who see it (chat), answered
  # `{:grove_say, id, tag, :ok | {:rejected, reason}}`.
  @callback say(world(), Entity.id(), String.t(), tag :: term()) :: :ok

  @optional_callbacks move_many: 3,
                      position: 2,
                      nearby: 3,
                      zone_index: 2,
                      zone_watched?: 2,
                      zones_now: 1,
                      kind_counts: 1,
                      act: 6,
                      act_many: 2,
                      step_many: 3,
                      game_near: 3,
                      attrs: 2,
                      say: 4
end
