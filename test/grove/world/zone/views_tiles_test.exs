defmodule Grove.World.Zone.ViewsTilesTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.{Entity, Grid, Rules, Terrain, View}
  alias Grove.World.Zone.{State, Views}

  # A format read tile by tile, as the gateway's is, that says what it was
  # given: a tile's entries, the ids gone from it and, by the format's name,
  # what else it carries: `:names` the names alone (`[]` where there are
  # none), `:extra` everything a tile's snapshot carries but its ground
  # (`nil` where there is nothing).
  defmodule Tiled do
    @moduledoc false
    @behaviour Grove.World.ViewFormat

    @impl true
    def tiled?(_name), do: true

    @impl true
    def encode_view(name, what, tile, entries, departed),
      do: {what, tile, entries, departed, extra(name, nil)}

    @impl true
    def encode_view(name, what, tile, entries, departed, extra),
      do: {what, tile, entries, departed, extra(name, extra)}

    defp extra(:names, nil), do: []
    defp extra(:names, extra), do: extra.names
    defp extra(:extra, nil), do: nil
    defp extra(:extra, extra), do: Map.delete(extra, :ground)
  end

  # A format read zone by zone.
  defmodule Whole do
    @moduledoc false
    @behaviour Grove.World.ViewFormat

    @impl true
    def encode_view(_name, what, zone, entries, departed), do: {what, zone, entries, departed}
  end

  @format {Tiled, :names}

  # A 90 x 90 meadow cut into nine 30 x 30 zones, each into nine 10 x 10
  # tiles; the zone is the middle one, cells 30 to 59 each way.
  @grid Grid.new(90, 90, 30, 10)
  @index 4
  @ids 1..8

  defp core do
    terrain = %Terrain{width: 90, height: 90, cells: :binary.copy(<<0>>, 90 * 90)}
    State.new(@index, @grid, terrain, Rules.new(move_rate: nil))
  end

  defp entity(id), do: %Entity{id: id, owner: self(), kind: rem(id, 3), label: label(id)}

  # Even ids are players, with names; odd ones are not.
  defp label(id), do: if(rem(id, 2) == 0, do: {"p#{id}", "🙂"})

  defp tiles_of_zone, do: for(y <- 3..5, x <- 3..5, do: y * 9 + x)

  describe "a tiled format" do
    test "is told it watches, and gets the tiles it asks for, of this zone only, at the zone's number" do
      me = self()
      {:ok, _entity, core} = State.place(core(), entity(2), [{45, 45}])

      {effects, views} =
        Views.subscribe(Views.new(@index, @grid, node(), 3), core, me, 1, @format)

      assert {:tell, me, {:grove_view, @index, :subscribed, 3}} in effects
      refute Enum.any?(effects, &match?({:tell, _, {:grove_view, _, :snapshot, _, _}}, &1))

      # Tile 40 holds (45, 45); tile 0 is another zone's.
      {effects, _views} = Views.snapshot_tiles(views, core, me, @format, [40, 30, 0])
      assert [{:count, :snapshots_sent}, {:tell, ^me, message}] = effects

      assert {:grove_view, @index, :tiles, 3,
              [
                {40, {:snapshot, 40, [{2, 45, 45, 2}], [], [{2, "p2", "🙂"}]}},
                {30, {:snapshot, 30, [], [], []}}
              ]} = message

      # Not a viewer: nothing.
      assert {[], _} = Views.snapshot_tiles(views, core, :c.pid(0, 1, 0), @format, [40])
    end

    test "gets an entity that crosses from one tile to another as gone from one, come into the other, named there" do
      {:ok, _entity, core} = State.place(core(), entity(2), [{39, 45}])

      {_effects, views} =
        Views.subscribe(Views.new(@index, @grid, node(), 0), core, self(), 1, @format)

      core = State.watch(core, true)
      {:moved, _entity, _from, core} = State.apply_move(core, 2, :e, self(), 1, 0)
      {changes, departed, labels, core} = State.flush(core)
      {extra, core} = State.flush_extra(core, labels)

      {[{:publish, 1, [{@format, cut}]} | _], _views} =
        Views.publish(views, core, changes, departed, extra)

      # It came into tile 40: nothing stayed there.
      assert Enum.sort(cut) == [
               {39, {{:delta, %{}}, 39, [], [2], []}},
               {40, {{:delta, %{}}, 40, [{2, 40, 45, 2}], [], [{2, "p2", "🙂"}]}}
             ]
    end

    test "is told which entities of a delta stayed in their tile, unless a snapshot of it was taken while they were away" do
      me = self()
      {:ok, _entity, core} = State.place(core(), entity(2), [{48, 45}])
      {:ok, _entity, core} = State.place(core, entity(3), [{35, 35}])

      {_effects, views} =
        Views.subscribe(Views.new(@index, @grid, node(), 0), core, me, 1, @format)

      core = State.watch(core, true)
      step = fn core, id, dir -> elem(State.apply_move(core, id, dir, me, 1, 0), 3) end

      delta = fn views, core ->
        {changes, departed, labels, core} = State.flush(core)
        {extra, core} = State.flush_extra(core, labels)

        {[{:publish, _seq, [{@format, cut}]} | _], views} =
          Views.publish(views, core, changes, departed, extra)

        # Each tile's stayed ids, entries and names, highest tile first.
        cut =
          for {tile, {{:delta, stayed}, tile, entries, [], names}} <-
                Enum.sort_by(cut, &elem(&1, 0), :desc),
              do: {tile, Map.keys(stayed), entries, names}

        {cut, views, core}
      end

      # Both step within their tiles: both stayed.
      core = core |> step.(2, :e) |> step.(3, :e)
      {cut, views, core} = delta.(views, core)
      assert cut == [{40, [2], [{2, 49, 45, 2}], []}, {30, [3], [{3, 36, 35, 0}], []}]

      # A snapshot of tile 40 that shows it: it stays.
      {_effects, views} = Views.snapshot_tiles(views, core, me, @format, [40])
      {cut, views, core} = delta.(views, step.(core, 2, :w))
      assert cut == [{40, [2], [{2, 48, 45, 2}], []}]

      # Out of tile 40 into 41, a snapshot of 40 without it, and back: its
      # next delta brings it to 40 as come, kind and name, for that
      # snapshot's viewer does not know it.
      core = core |> step.(2, :e) |> step.(2, :e)
      {_effects, views} = Views.snapshot_tiles(views, core, me, @format, [40])
      {cut, views, core} = delta.(views, step.(core, 2, :w))
      assert cut == [{40, [], [{2, 49, 45, 2}], [{2, "p2", "🙂"}]}]

      # And the delta after it, as before.
      {cut, _views, _core} = delta.(views, step.(core, 2, :w))
      assert cut == [{40, [2], [{2, 48, 45, 2}], []}]
    end
  end

  describe "a snapshot of tiles" do
    test "shows in each tile what the zone's whole snapshot shows there: entities, bacteria, names, the game's cells" do
      cell = {:proper_types.integer(30, 59), :proper_types.integer(30, 59)}
      tile = :proper_types.elements(tiles_of_zone() ++ [0])

      check(
        forall(
          {:proper_types.list(cell), :proper_types.list(cell), :proper_types.list(cell),
           :proper_types.non_empty(:proper_types.list(tile))},
          fn {at, bacteria, baskets, tiles} ->
            format = {Tiled, :extra}
            spec = Grove.World.Game.Spec.new!({Grove.AppleGame, baskets: baskets, tick: :manual})
            core = Grove.World.Zone.Game.setup(core(), spec, :generate)

            core =
              at
              |> Enum.with_index(1)
              |> Enum.reduce(core, fn {cell, id}, core ->
                case State.place(core, entity(id), [cell]) do
                  {:ok, _entity, core} -> core
                  {:rejected, _reason, core} -> core
                end
              end)

            board = Grove.World.Life.Board.put(Grove.World.Life.Board.new(core.bounds), bacteria)
            core = State.put_bacteria(core, board)

            {_effects, views} =
              Views.subscribe(Views.new(@index, @grid, node(), 0), core, self(), 1, format)

            ours = Enum.filter(tiles, &(Grid.tile_zone(@grid, &1) == @index))

            data =
              case Views.snapshot_tiles(views, core, self(), format, tiles) do
                {[{:count, :snapshots_sent}, {:tell, _, {:grove_view, @index, :tiles, 0, data}}],
                 _views} ->
                  data

                # None of this zone's tiles asked: nothing.
                {[], _views} when ours == [] ->
                  []
              end

            whole = State.snapshot_extra(core)
            tile_of = fn x, y -> Grid.tile_of(@grid, x, y) end
            where = Map.new(State.snapshot(core), fn {id, x, y, _} -> {id, tile_of.(x, y)} end)
            assert Enum.map(data, &elem(&1, 0)) == ours

            for {t, {:snapshot, shown, entries, [], extra}} <- data do
              assert shown == t

              assert entries ==
                       for(
                         {_id, x, y, _kind} = e <- State.snapshot(core),
                         tile_of.(x, y) == t,
                         do: e
                       )

              assert extra.names == for({id, _, _} = n <- whole.names, where[id] == t, do: n)
              assert extra.looks == for({id, _} = l <- whole.looks, where[id] == t, do: l)
              assert extra.cells == for({x, y, _} = c <- whole.cells, tile_of.(x, y) == t, do: c)
              assert extra.events == []
            end

            true
          end
        ),
        numtests: 200
      )
    end
  end

  ## The property: whatever entities do (move within the zone, across its
  ## tiles and out of it, come into it) and whatever tiles a viewer holds,
  ## each tile it holds shows, after each delta, exactly the entities in it,
  ## each once, named if it has a name.

  defp command do
    id = :proper_types.integer(1, 8)
    tile = :proper_types.integer(0, 8)
    dir = :proper_types.oneof(Grid.directions())

    :proper_types.frequency([
      {8, {:move, id, dir}},
      {2, {:arrive, id, :proper_types.integer(30, 59), :proper_types.integer(30, 59)}},
      {2, {:want, tile}},
      {1, {:away_and_back, id, dir}},
      {1, {:drop, tile}},
      {1, :subscribe},
      {3, :tick}
    ])
  end

  test "a viewer holding any tiles sees in each exactly what is in it, none twice, none lost across tile and zone borders" do
    check(
      forall(:proper_types.list(command()), fn commands ->
        core =
          Enum.reduce(@ids, core(), fn id, core ->
            cell = {30 + rem(id * 7, 30), 30 + rem(id * 13, 30)}

            case State.place(core, entity(id), [cell]) do
              {:ok, _entity, core} -> core
              {:rejected, _reason, core} -> core
            end
          end)

        # Someone watches the zone whole from the start; the tiled viewer
        # subscribes at some point (its first `:subscribe`), and asks for
        # tiles from then on.
        {_effects, views} =
          Views.subscribe(
            Views.new(@index, @grid, node(), 0),
            core,
            :c.pid(0, 1, 0),
            1,
            {Whole, :w}
          )

        sim = %{
          core: State.watch(core, true),
          views: views,
          view: View.new({0, 0}),
          held: %{},
          names: %{}
        }

        sim = Enum.reduce(commands, sim, &step/2)
        check!(tick(sim))
        true
      end),
      numtests: 300
    )
  end

  defp step({:move, id, dir}, sim) do
    case State.apply_move(sim.core, id, dir, self(), 1, 0) do
      {:moved, _entity, _from, core} ->
        %{sim | core: core}

      # Out of the zone: it goes (to a neighbour, as far as this zone sees).
      {:handoff, _entity, _zone, _cell, core} ->
        {_gone, core} = State.remove(core, id)
        %{sim | core: core}

      {_refused, _reason, core} ->
        %{sim | core: core}

      {_other, core} ->
        %{sim | core: core}
    end
  end

  defp step({:arrive, id, x, y}, sim) do
    if Map.has_key?(sim.core.entities, id) do
      sim
    else
      case State.accept_arrival(sim.core, entity(id), {x, y}) do
        {:ok, _entity, core} -> %{sim | core: core}
        {:rejected, _reason, core} -> %{sim | core: core}
      end
    end
  end

  # A step out of a tile, a snapshot of that tile taken while it is
  # away, and a step back, all between two deltas: the next delta must
  # tell it to the snapshot's viewer as come into the tile, kind and all.
  defp step({:away_and_back, id, dir}, sim) do
    case sim.core.entities do
      %{^id => %Entity{x: x, y: y}} ->
        k = Enum.find_index(tiles_of_zone(), &(&1 == Grid.tile_of(@grid, x, y)))

        back =
          Enum.at(Grid.directions(), rem(Enum.find_index(Grid.directions(), &(&1 == dir)) + 4, 8))

        sim = step({:move, id, dir}, sim)
        sim = if k, do: step({:want, k}, sim), else: sim
        step({:move, id, back}, sim)

      _gone ->
        sim
    end
  end

  defp step(:subscribe, sim) do
    {_effects, views} = Views.subscribe(sim.views, sim.core, self(), 1, @format)
    %{sim | views: views}
  end

  defp step({:want, k}, sim) do
    tile = Enum.at(tiles_of_zone(), k)
    {effects, views} = Views.snapshot_tiles(sim.views, sim.core, self(), @format, [tile])

    case for {:tell, _, message} <- effects, do: message do
      # Not subscribed yet: nothing.
      [] -> sim
      [message] -> take_snapshot(%{sim | views: views}, tile, message)
    end
  end

  defp step({:drop, k}, sim) do
    tile = Enum.at(tiles_of_zone(), k)
    %{sim | view: View.drop_area(sim.view, tile), held: Map.delete(sim.held, tile)}
  end

  defp step(:tick, sim), do: check!(tick(sim))

  defp take_snapshot(sim, tile, {:grove_view, @index, :tiles, seq, data}) do
    Enum.reduce(data, sim, fn {^tile, {:snapshot, ^tile, entries, [], names}}, sim ->
      %{
        sim
        | view: View.put_area(sim.view, tile, entries),
          held: Map.put(sim.held, tile, seq),
          names: learn(sim.names, names)
      }
    end)
  end

  defp tick(sim) do
    {changes, departed, labels, core} = State.flush(sim.core)
    {extra, core} = State.flush_extra(core, labels)
    {effects, views} = Views.publish(sim.views, core, changes, departed, extra)
    sim = %{sim | core: core, views: views}

    case effects do
      [] ->
        sim

      [{:publish, seq, encoded} | _] ->
        cut = encoded |> List.keyfind(@format, 0, {@format, []}) |> elem(1)
        assert length(Enum.uniq_by(cut, &elem(&1, 0))) == length(cut), "a tile twice in a delta"

        Enum.reduce(cut, sim, fn {tile, {{:delta, stayed}, tile, entries, gone, names}}, sim ->
          case sim.held do
            %{^tile => held} when held < seq ->
              # What stayed in the tile, the viewer knows there: its
              # kind may be left out (version 6 of the protocol does).
              mirror = Map.get(sim.view.mirrors, tile, %{})

              for {id, _x, _y, _kind} <- entries,
                  is_map_key(stayed, id),
                  do: assert(is_map_key(mirror, id), "#{id} stayed in #{tile}, not known there")

              %{
                sim
                | view: View.update_area(sim.view, tile, entries, gone),
                  held: Map.put(sim.held, tile, seq),
                  names: learn(sim.names, names)
              }

            _not_held ->
              sim
          end
        end)
    end
  end

  defp learn(names, new),
    do: Enum.reduce(new, names, fn {id, name, _}, names -> Map.put(names, id, name) end)

  # Each tile held shows exactly what is in it; what the view knows is the
  # entities of the tiles held, each in one; each player there is named.
  defp check!(sim) do
    truth =
      for {id, %Entity{x: x, y: y, kind: kind}} <- sim.core.entities,
          is_map_key(sim.held, Grid.tile_of(@grid, x, y)),
          into: %{},
          do: {id, {x, y, kind}}

    for tile <- Map.keys(sim.held) do
      shown = Map.get(sim.view.mirrors, tile, %{})

      inside =
        for {id, {x, y, _kind} = entry} <- truth,
            Grid.tile_of(@grid, x, y) == tile,
            into: %{},
            do: {id, entry}

      assert shown == inside, "tile #{tile} shows #{inspect(shown)}, holds #{inspect(inside)}"
    end

    assert View.known(sim.view) == truth

    for {id, _entry} <- truth,
        label(id) != nil,
        do: assert(sim.names[id] == elem(label(id), 0), "#{id} unnamed")

    sim
  end
end
