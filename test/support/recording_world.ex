defmodule Grove.Test.RecordingWorld do
  @moduledoc """
  A `Grove.World.Client` that passes every call to a real world and tells a
  test process about it, so tests see exactly what actors ask of the world.
  Its world term is `{world_name, test_pid}`.
  """

  @behaviour Grove.World.Client

  alias Grove.World

  @impl true
  def join({world, test}, opts) do
    result = World.join(world, opts)
    send(test, {:world_join, self(), opts, result})
    result
  end

  @impl true
  def move({world, test}, id, direction, tag) do
    send(test, {:world_move, self(), id, direction})
    World.move(world, id, direction, tag)
  end

  @impl true
  def move_many(world, moves), do: move_many(world, moves, [])

  @impl true
  def move_many({world, test}, moves, opts) do
    for {id, direction, _tag} <- moves, do: send(test, {:world_move, self(), id, direction})
    World.move_many(world, moves, opts)
  end

  @impl true
  def leave({world, _test}, id), do: World.leave(world, id)

  @impl true
  def grid({world, _test}), do: World.grid(world)

  @impl true
  def terrain({world, _test}), do: World.terrain(world)

  @impl true
  def kind_counts({world, _test}), do: World.kind_counts(world)

  @impl true
  def position({world, test}, id) do
    send(test, {:world_position, self(), id})
    World.position(world, id)
  end

  @impl true
  def nearby({world, test}, cell, radius) do
    send(test, {:world_nearby, self(), cell, radius})
    World.nearby(world, cell, radius)
  end
end
