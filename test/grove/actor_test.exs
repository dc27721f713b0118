defmodule Grove.ActorTest do
  use ExUnit.Case, async: true

  alias Grove.Actor

  doctest Grove.Actor
  doctest Grove.Actor.Senses
  doctest Grove.Actors.Walker

  defmodule Plain do
    @behaviour Grove.Actor
    @impl true
    def init(_opts, _roll), do: :ok
    @impl true
    def step(state, _senses, _roll), do: {:stay, state}
  end

  defmodule Farsighted do
    def init(_opts, _roll), do: :ok
    def step(state, _senses, _roll), do: {:stay, state}
    def senses, do: [radius: 99]
  end

  test "a kind's optional callbacks have defaults" do
    assert %{module: Plain, name: "plain", emoji: "", senses: nil} = Actor.describe!(Plain)

    assert %{name: "sheep", emoji: "🐑", senses: %{radius: 4, entities: true}} =
             Actor.describe!(Grove.Actors.Sheep)

    assert %{senses: nil} = Actor.describe!(Grove.Actors.Walker)
  end

  test "what is not a kind is refused with what is wrong" do
    assert_raise ArgumentError, ~r/does not define init\/2/, fn -> Actor.describe!(Enum) end
    assert_raise ArgumentError, ~r/not a module that exists/, fn -> Actor.describe!(Nope.Kind) end
    assert_raise ArgumentError, ~r/senses\/0 must be/, fn -> Actor.describe!(Farsighted) end
    assert_raise ArgumentError, ~r/is a module/, fn -> Actor.describe!("walker") end
  end

  test "directions and headings are each other's inverse" do
    for heading <- 0..7, do: assert(Actor.heading(Actor.direction(heading)) == heading)
  end
end
