defmodule Grove.Bench.Actors.Poke do
  @moduledoc """
  The actor bench's trivial game (`mix grove.bench.actors --act`): one
  action, `poke`, aimed at the actor's own cell, which adds one to the
  actor's attribute and answers nothing else. An action as cheap as an
  action can be that still runs a game's code and writes what it
  changed, to set beside a move.
  """

  @behaviour Grove.Game

  @impl true
  def actions, do: %{poke: []}

  @impl true
  def join(entity, _info, _area), do: [{:attrs, entity.id, 0}]

  @impl true
  def act(%Grove.Game.Act{name: :poke, actor: actor}, _area),
    do: {:ok, [{:attrs, actor.id, (actor.attrs || 0) + 1}]}
end

defmodule Grove.Bench.Actors.Poker do
  @moduledoc "The actor kind of `Grove.Bench.Actors.Poke`: each step, a poke where it stands."

  @behaviour Grove.Actor

  @impl true
  def init(_opts, _roll), do: nil

  @impl true
  def step(state, _senses, _roll), do: {{:act, :poke, :here}, state}

  @impl true
  def name, do: "poker"
end
