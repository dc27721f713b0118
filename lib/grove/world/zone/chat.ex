defmodule Grove.World.Zone.Chat do
  @moduledoc false
  # A line said by an entity, on the zone's pure core: it becomes an event
  # at the speaker's cell (`State.event/5`, named `:chat`), which the next
  # delta carries to everyone who watches the zone, through the feed, like
  # a game's events. An entity that moved on is followed to its zone, as a
  # move is (`Handoff.follow/4`). A speaker on its way to another zone
  # still stands on its cell here, so it speaks here.

  alias Grove.World.Entity
  alias Grove.World.Zone.{Handoff, State}

  @typedoc "What became of a line."
  @type result ::
          {:said, Grove.World.Grid.cell(), State.t()}
          | {:rejected, :not_owner | :unknown_entity, State.t()}
          | {:forward, Grove.World.Grid.zone_index(), State.t()}

  @spec say(State.t(), Entity.id(), String.t(), pid(), non_neg_integer(), Handoff.locate()) ::
          result()
  def say(%State{} = state, id, text, owner, hops, locate) do
    case state.entities do
      %{^id => %Entity{owner: ^owner, x: x, y: y}} ->
        {:said, {x, y}, State.event(state, id, {x, y}, :chat, %{text: text})}

      %{^id => _other_owner} ->
        {:rejected, :not_owner, state}

      _ ->
        case Handoff.follow(state, id, hops, locate) do
          {:ok, to} -> {:forward, to, state}
          :error -> {:rejected, :unknown_entity, state}
        end
    end
  end
end
