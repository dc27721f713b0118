defmodule Grove.Games.Orchard do
  @moduledoc """
  The game `make run` plays: an orchard. One tree in four bears apples
  (🍎 on a 🌳), up to three, which grow back over time; players pick them
  (`pick`, toward the tree), carry up to three, and bring them to a basket
  (🧺, here and there on the meadows; `deliver`, toward it) to score. Every
  apple delivered is a point, on the player and on the world's
  leaderboard (the `:orchard` tally, by account). Sheep graze the flowers
  down (`graze`, toward flowers; 🌱) and the flowers grow back. A player
  who leaves drops what it carries where it stood (🍎 on the ground), and
  whoever steps there picks it up.

  Built on `Grove.Game` alone, as any game would be: two kinds of actors
  play it too, `Grove.Games.Orchard.Picker` (picks and delivers) and
  `Grove.Games.Orchard.Grazer` (sheep that graze).

  ## Options

    * `:fruit` - one tree in this many bears apples (default `4`)
    * `:baskets` - one meadow cell in this many holds a basket (default `250`)
    * `:grow` - the chance, in thousandths, that a tree with fewer than
      three apples grows one at a tick (default `40`: one every 25 s on
      average); a tick is a second unless the game's `:tick` says otherwise
    * `:regrow` - the chance, in thousandths, that grazed flowers grow back
      at a tick (default `20`)

  ## The layer

    * `{:tree, n}` - an apple tree with `n` apples (0 to 3); shown as code
      1 while it has any
    * `:basket` - a basket, which blocks like a tree; code 2
    * `:grazed` - flowers eaten down; code 3
    * `{:apples, n}` - apples on the ground; code 4

  An entity's attributes are `%{carrying: n, score: points, account: id}`
  (the account is the player's, `nil` for guests and actors); its look is
  how many apples it carries.
  """

  @behaviour Grove.Game

  alias Grove.Game.{Act, Area}

  @carry 3
  @most 3

  @impl true
  def actions, do: %{pick: [], deliver: [], graze: []}

  @impl true
  def init(options) do
    options = Keyword.validate!(options, fruit: 4, baskets: 250, grow: 40, regrow: 20)

    for {key, value} <- options, not (is_integer(value) and value > 0) do
      raise ArgumentError,
            "orchard option #{inspect(key)} must be a positive integer, got: #{inspect(value)}"
    end

    Map.new(options)
  end

  # Which trees bear and where the baskets stand follow from the cell
  # alone, so every zone (and every node) lays the same orchard.
  @impl true
  def cell({x, y}, :tree, config) do
    if :erlang.phash2({x, y, :fruit}, config.fruit) == 0,
      do: {:tree, :erlang.phash2({x, y, :apples}, @most + 1)},
      else: nil
  end

  def cell({x, y}, :meadow, config) do
    if :erlang.phash2({x, y, :basket}, config.baskets) == 0, do: :basket, else: nil
  end

  def cell(_cell, _ground, _config), do: nil

  @impl true
  def join(entity, info, _area),
    do: [{:attrs, entity.id, %{carrying: 0, score: 0, account: Map.get(info, :account)}}]

  @impl true
  def leave(%{attrs: %{carrying: carrying}, x: x, y: y}, area) when carrying > 0 do
    here = {x, y}

    lying =
      case Area.cell(area, here) do
        {:apples, n} -> n
        _nothing_or_grazed -> 0
      end

    [{:cell, here, {:apples, lying + carrying}}, {:event, here, :dropped, %{apples: carrying}}]
  end

  def leave(_entity, _area), do: []

  # Stepping on apples picks up as many as fit in the hands.
  @impl true
  def enter(%{attrs: %{carrying: carrying} = attrs, x: x, y: y} = entity, area)
      when carrying < @carry do
    case Area.cell(area, {x, y}) do
      {:apples, n} ->
        taken = min(n, @carry - carrying)
        left = if n == taken, do: nil, else: {:apples, n - taken}

        [
          {:cell, {x, y}, left},
          {:attrs, entity.id, %{attrs | carrying: carrying + taken}},
          {:event, {x, y}, :picked, %{apples: taken}}
        ]

      _ ->
        []
    end
  end

  def enter(_entity, _area), do: []

  # Only apples on the ground are picked up as one steps there: a step
  # onto a cell whose layer holds nothing needs no call.
  @impl true
  def enter_cells, do: :layer

  # Trees bear again, flowers grow back: each by its own chance, from the
  # tick's random integer and the cell. A tick is the catch-up of one.
  @impl true
  def tick(area, roll), do: catch_up(area, 1, roll)

  # `ticks` ticks at once, each cell's outcome drawn from what those ticks
  # would have given it: a tree short of apples grows one at each tick
  # with chance p until it has three, so it gains min(short, S) with S of
  # the binomial law B(ticks, p); grazed flowers come back at the first
  # tick of chance r that comes up, so within `ticks` with chance
  # 1 - (1 - r)^ticks. One draw per cell, whatever the count.
  @impl true
  def catch_up(area, ticks, roll) do
    config = Area.config(area)
    grow = config.grow / 1000
    bears = bears(grow, ticks)
    regrows = 1 - :math.pow(1 - config.regrow / 1000, ticks)

    # Only trees short of apples and grazed flowers can change
    # (`ticks?/1`): the zone lists those alone, not the rest of the layer
    # (every other tree, the baskets, apples on the ground).
    for {cell, value} <- Area.ticking(area),
        effect = grow(value, cell, draw(roll, cell), bears, regrows),
        effect != nil,
        do: effect
  end

  @impl true
  def ticks?({:tree, n}), do: n < @most
  def ticks?(:grazed), do: true
  def ticks?(_value), do: false

  # A uniform draw in [0, 1) for a cell at a tick.
  @draws 1_000_000
  defp draw(roll, cell), do: :erlang.phash2({roll, cell}, @draws) / @draws

  # The chances that `ticks` ticks of chance p grow no apple, at most one,
  # at most two: P(S <= 0), P(S <= 1), P(S <= 2).
  defp bears(p, ticks) do
    q = 1 - p
    none = :math.pow(q, ticks)
    one = ticks * p * :math.pow(q, ticks - 1)
    two = ticks * (ticks - 1) / 2 * p * p * :math.pow(q, max(ticks - 2, 0))
    {none, none + one, none + one + two}
  end

  defp grow({:tree, n}, cell, u, {none, one, two}, _regrows) when n < @most do
    grown =
      cond do
        u < none -> 0
        u < one -> 1
        u < two -> 2
        true -> @most
      end

    if grown > 0, do: {:cell, cell, {:tree, min(n + grown, @most)}}
  end

  defp grow(:grazed, cell, u, _bears, regrows) do
    if u < regrows, do: {:cell, cell, nil}
  end

  defp grow(_value, _cell, _u, _bears, _regrows), do: nil

  @impl true
  def act(%Act{name: :pick, actor: %{attrs: attrs} = actor, target: target}, area) do
    case Area.cell(area, target) do
      {:tree, n} when n > 0 and attrs.carrying < @carry ->
        carrying = attrs.carrying + 1

        {:ok, %{carrying: carrying},
         [
           {:cell, target, {:tree, n - 1}},
           {:attrs, actor.id, %{attrs | carrying: carrying}},
           {:event, target, :picked, %{apples: 1}}
         ]}

      {:tree, n} when n > 0 ->
        {:error, :hands_full}

      {:tree, _bare} ->
        {:error, :no_apples}

      _ ->
        {:error, :not_an_apple_tree}
    end
  end

  def act(%Act{name: :deliver, actor: %{attrs: attrs} = actor, target: target}, area) do
    cond do
      Area.cell(area, target) != :basket ->
        {:error, :not_a_basket}

      attrs.carrying == 0 ->
        {:error, :empty_hands}

      true ->
        points = attrs.carrying
        score = attrs.score + points
        tally = if attrs.account, do: [{:tally, :orchard, attrs.account, points}], else: []

        {:ok, %{score: score, points: points},
         [
           {:attrs, actor.id, %{attrs | carrying: 0, score: score}},
           {:event, target, :scored, %{points: points}}
           | tally
         ]}
    end
  end

  def act(%Act{name: :graze, target: target}, area) do
    if Area.ground(area, target) == :flowers and Area.cell(area, target) == nil,
      do: {:ok, [{:cell, target, :grazed}, {:event, target, :grazed, %{}}]},
      else: {:error, :no_flowers}
  end

  @impl true
  def show({:tree, n}) when n > 0, do: 1
  def show(:basket), do: 2
  def show(:grazed), do: 3
  def show({:apples, _n}), do: 4
  def show(_value), do: 0

  @impl true
  def look(%{carrying: carrying}), do: carrying

  @impl true
  def blocks(:basket), do: true
  def blocks(_value), do: nil

  @impl true
  def legend do
    %{
      name: "orchard",
      title: "Orchard",
      help:
        "Pick apples from the trees that bear them (🍎), carry up to three, " <>
          "and bring them to a basket (🧺) to score. Sheep graze the flowers; they grow back.",
      actions: %{
        pick: %{key: "F", label: "Pick", emoji: "🍎", cells: [1]},
        deliver: %{key: "R", label: "Deliver", emoji: "🧺", cells: [2]},
        graze: %{hidden: true}
      },
      cells: %{
        1 => %{name: "apples", emoji: "🍎", badge: true},
        2 => %{name: "basket", emoji: "🧺"},
        3 => %{name: "grazed flowers", emoji: "🌱"},
        4 => %{name: "fallen apples", emoji: "🍎"}
      },
      looks: %{
        1 => %{name: "one apple", emoji: "🍎"},
        2 => %{name: "two apples", emoji: "🍎🍎"},
        3 => %{name: "three apples", emoji: "🍎🍎🍎"}
      },
      events: %{picked: "🍎", scored: "⭐", grazed: "🌿", dropped: "🍎"},
      reasons: %{
        no_apples: "No apples on this tree yet: they grow back.",
        hands_full: "Your hands are full: bring your apples to a basket 🧺.",
        not_an_apple_tree: "Face a tree with apples 🍎 to pick.",
        not_a_basket: "Face a basket 🧺 to deliver.",
        empty_hands: "You carry no apples: pick some first.",
        no_flowers: "No flowers to graze there."
      },
      board: %{tally: :orchard, title: "Best pickers", unit: "🍎"}
    }
  end
end
