defmodule Grove.AppleGame do
  @moduledoc """
  A small game for tests, using every part of `Grove.Game`: trees bear
  apples (`{:tree, n}`), entities pick them (`pick`, toward a tree), carry
  up to three, and `deliver` them into a basket (`:basket`, on the cells
  the `:baskets` option lists) to score, tallied per account on the
  `:apples` board. `drop` puts apples down on its target (`{:apples, n}`),
  where whoever steps on them picks them up (`enter/2`); an entity
  that leaves drops what it carries (`leave/2`). Trees stand where the
  ground has them, and on the cells the `:trees` option lists. `build` puts a wall, which
  blocks, and `bridge` one that frees water. Each tick, every tree below
  `:most` (default 3) grows an apple. `crash` and `bad` fail on purpose.

  Apples are neither made nor lost but by `tick/2`: the property tests
  count them (`apples/1` of a state's layer and entities).
  """

  @behaviour Grove.Game

  alias Grove.Game.{Act, Area}

  @carry 3

  @impl true
  def actions do
    %{
      pick: [],
      deliver: [],
      drop: [count: {:optional, {:integer, 1, 3}, 1}],
      build: [],
      bridge: [],
      shout: [text: {:string, 16}, loud: {:optional, :boolean, false}],
      crash: [],
      bad: [],
      slow: [kind: {:one_of, [:a, :b]}]
    }
  end

  @impl true
  def init(options) do
    %{
      baskets: MapSet.new(Keyword.get(options, :baskets, [])),
      trees: MapSet.new(Keyword.get(options, :trees, [])),
      apples: Keyword.get(options, :apples, 1),
      most: Keyword.get(options, :most, 3)
    }
  end

  @impl true
  def cell(cell, ground, config) do
    cond do
      MapSet.member?(config.baskets, cell) -> :basket
      ground == :tree or MapSet.member?(config.trees, cell) -> {:tree, config.apples}
      true -> nil
    end
  end

  @impl true
  def join(entity, info, _area),
    do: [{:attrs, entity.id, %{carrying: 0, score: 0, account: Map.get(info, :account)}}]

  @impl true
  def leave(%{attrs: %{carrying: carrying}} = entity, area) when carrying > 0,
    do: [{:cell, {entity.x, entity.y}, pile(Area.cell(area, {entity.x, entity.y}), carrying)}]

  def leave(_entity, _area), do: []

  @impl true
  def enter(%{attrs: %{carrying: carrying} = attrs} = entity, area) when carrying < @carry do
    case Area.cell(area, {entity.x, entity.y}) do
      {:apples, n} ->
        taken = min(n, @carry - carrying)
        left = if n == taken, do: nil, else: {:apples, n - taken}

        [
          {:cell, {entity.x, entity.y}, left},
          {:attrs, entity.id, %{attrs | carrying: carrying + taken}}
        ]

      _ ->
        []
    end
  end

  def enter(_entity, _area), do: []

  @impl true
  def tick(area, _roll) do
    most = Area.config(area).most
    for {cell, {:tree, n}} <- Area.cells(area), n < most, do: {:cell, cell, {:tree, n + 1}}
  end

  @impl true
  def act(%Act{name: :pick, actor: actor, target: target}, area) do
    attrs = actor.attrs

    case Area.cell(area, target) do
      {:tree, n} when n > 0 and attrs.carrying < @carry ->
        {:ok, %{carrying: attrs.carrying + 1},
         [
           {:cell, target, {:tree, n - 1}},
           {:attrs, actor.id, %{attrs | carrying: attrs.carrying + 1}},
           {:event, target, :picked, %{left: n - 1}}
         ]}

      {:tree, n} when n > 0 ->
        {:error, :hands_full}

      {:tree, _none} ->
        {:error, :no_apples}

      _ ->
        {:error, :not_a_tree}
    end
  end

  def act(%Act{name: :deliver, actor: %{attrs: attrs} = actor, target: target}, area) do
    cond do
      Area.cell(area, target) != :basket ->
        {:error, :not_a_basket}

      attrs.carrying == 0 ->
        {:error, :nothing_to_deliver}

      true ->
        score = attrs.score + attrs.carrying
        tally = if attrs.account, do: [{:tally, :apples, attrs.account, attrs.carrying}], else: []

        {:ok, %{score: score}, [{:attrs, actor.id, %{attrs | carrying: 0, score: score}} | tally]}
    end
  end

  # Onto the target, the actor's own cell or one next to it (in the
  # target's zone, where the action runs: never the actor's cell when the
  # target lies across a border).
  def act(
        %Act{name: :drop, actor: %{attrs: attrs} = actor, target: target, args: %{count: count}},
        area
      ) do
    value = Area.cell(area, target)
    open = target == {actor.x, actor.y} or not match?(%{}, Area.entity_at(area, target))

    cond do
      not (value == nil or match?({:apples, _}, value)) or not open ->
        {:error, :no_room}

      attrs.carrying < count ->
        {:error, :not_enough}

      true ->
        {:ok,
         [
           {:cell, target, pile(value, count)},
           {:attrs, actor.id, %{attrs | carrying: attrs.carrying - count}}
         ]}
    end
  end

  def act(%Act{name: :build, target: target}, area) do
    if Area.free?(area, target) and Area.cell(area, target) == nil,
      do: {:ok, [{:cell, target, :wall}]},
      else: {:error, :no_room}
  end

  def act(%Act{name: :bridge, target: target}, _area), do: {:ok, [{:cell, target, :bridge}]}

  def act(%Act{name: :shout, actor: actor, args: args}, _area),
    do:
      {:ok, %{heard: true},
       [{:event, {actor.x, actor.y}, :shout, %{text: args.text, loud: args.loud}}]}

  def act(%Act{name: :crash}, _area), do: raise("the apple game crashes on purpose")
  def act(%Act{name: :bad}, _area), do: {:ok, %{}, [{:cell, {-5, -5}, :nowhere}]}

  def act(%Act{name: :slow, args: %{kind: kind}}, _area),
    do: {:ok, %{kind: Atom.to_string(kind)}, []}

  @impl true
  def show({:tree, n}) when n > 0, do: 1
  def show(:basket), do: 2
  def show({:apples, _n}), do: 3
  def show(:wall), do: 4
  def show(_value), do: 0

  @impl true
  def look(%{carrying: carrying}), do: carrying

  @impl true
  def blocks(:wall), do: true
  def blocks(:basket), do: true
  def blocks({:tree, _apples}), do: true
  def blocks(:bridge), do: false
  def blocks(_value), do: nil

  @impl true
  def legend do
    %{
      title: "Apples",
      cells: %{1 => %{name: "apples", emoji: "🍎"}, 2 => %{name: "basket", emoji: "🧺"}},
      looks: %{1 => %{name: "one apple", emoji: "🍎"}}
    }
  end

  defp pile({:apples, n}, more), do: {:apples, n + more}
  defp pile(nil, more), do: {:apples, more}

  @doc "Apples in a layer (`{key, value}` pairs) and entities' attributes, and points scored."
  def apples(layer, attrs) do
    on_cells =
      Enum.reduce(layer, 0, fn
        {_key, {:tree, n}}, acc -> acc + n
        {_key, {:apples, n}}, acc -> acc + n
        _, acc -> acc
      end)

    carried = Enum.reduce(attrs, 0, fn a, acc -> acc + ((a && a.carrying) || 0) end)
    scored = Enum.reduce(attrs, 0, fn a, acc -> acc + ((a && a.score) || 0) end)
    {on_cells + carried, scored}
  end
end
