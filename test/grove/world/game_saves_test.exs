defmodule Grove.World.GameSavesTest.Cases do
  @moduledoc false
  # The game's state in the store, on either engine: the zones' layers
  # saved in batches and loaded when a world starts again, and tallies
  # added up, kept and read back, each node its own share.

  defmacro __using__(_opts) do
    quote do
      import Grove.WorldCase, only: [act: 4]

      alias Grove.AppleGame
      alias Grove.World
      alias Grove.World.Game.{Saver, Tally}

      @game {AppleGame,
             trees: [{9, 5}, {10, 5}], baskets: [{5, 5}], tick: :manual, save: 3_600_000}

      defp start_world(store, game \\ @game) do
        name = :"saves_world_#{System.unique_integer([:positive])}"

        start_supervised!(
          {World,
           name: name,
           width: 40,
           height: 40,
           zone_size: 10,
           tick: :manual,
           terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
           rules: [move_rate: nil],
           game: game,
           store: {Grove.Store, store}},
          id: name
        )

        name
      end

      defp stop_world(name), do: :ok = stop_supervised(name)

      defp saver(world) do
        {_, pid, _, _} =
          world
          |> Supervisor.which_children()
          |> Enum.find(&(elem(&1, 0) == Saver))

        pid
      end

      test "a world that starts again on its store finds its game's layer as it was saved", %{
        store: store
      } do
        world = start_world(store)
        {:ok, id, _} = World.join(world, at: {8, 5}, info: %{account: 3})
        assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
        assert Saver.save_now(saver(world)) == :ok
        assert World.stats(world).game_zones_saved == 1
        assert World.Game.saved_at(world) != nil
        # Nothing changed since: nothing more to write.
        assert Saver.save_now(saver(world)) == :ok
        assert World.stats(world).game_zones_saved == 1
        stop_world(world)

        again = start_world(store)
        assert World.cell(again, {9, 5}) == {{:tree, 0}, 0}
        assert World.cell(again, {10, 5}) == {{:tree, 1}, 1}
        assert World.stats(again).game_zones_loaded == 1
      end

      test "a zone's layer is written whole once, then only its changed cells, until they are worth a new base",
           %{store: store} do
        # Twenty trees in zone 0, bare, that a tick grows all at once.
        trees = for x <- 0..9, y <- 1..2, do: {x, y}
        game = {AppleGame, trees: trees, apples: 0, tick: :manual, save: 3_600_000}
        world = start_world(store, game)
        scope = World.Game.save_scope(World.fetch!(world))
        {:ok, id, _} = World.join(world, at: {5, 3})
        tick = fn -> World.Game.tick(world) && :sys.get_state(World.zone_pid(world, 0)) end

        tick.()
        assert :ok = Saver.save_now(saver(world))
        assert %{game_zones_saved: 1, game_bases_saved: 1} = World.stats(world)

        # One cell changed: its changes alone.
        assert act(world, id, :pick, :n) == {:ok, %{carrying: 1}}
        assert act(world, id, :drop, :e) == {:ok, %{}}
        assert :ok = Saver.save_now(saver(world))
        assert %{game_zones_saved: 2, game_bases_saved: 1} = World.stats(world)
        assert {:ok, _changes} = Grove.Store.fetch_state(store, scope, "0/changes")

        # Twenty changed of twenty-one: a new base, without changes beside it.
        tick.()
        assert :ok = Saver.save_now(saver(world))
        assert %{game_zones_saved: 3, game_bases_saved: 2} = World.stats(world)
        assert {:error, :not_found} = Grove.Store.fetch_state(store, scope, "0/changes")

        assert act(world, id, :pick, :n) == {:ok, %{carrying: 1}}
        assert :ok = Saver.save_now(saver(world))
        assert %{game_zones_saved: 4, game_bases_saved: 2} = World.stats(world)
        layer = World.Game.layer(World.fetch!(world), 0)
        stop_world(world)

        # Base and changes, applied: the layer as it was.
        again = start_world(store, game)
        assert World.cell(again, {5, 2}) == {{:tree, 0}, 0}
        assert World.cell(again, {4, 2}) == {{:tree, 2}, 1}
        assert World.cell(again, {6, 3}) |> elem(0) == {:apples, 1}
        assert World.Game.layer(World.fetch!(again), 0) == layer
        assert World.stats(again).game_zones_loaded == 1
        # A new run of the zone: its next save is a base.
        {:ok, id, _} = World.join(again, at: {4, 3})
        assert act(again, id, :pick, :n) == {:ok, %{carrying: 1}}
        assert :ok = Saver.save_now(saver(again))
        assert %{game_zones_saved: 1, game_bases_saved: 1} = World.stats(again)
      end

      test "a zone's changes give way to a new base after twelve saves, however few cells changed",
           %{store: store} do
        game =
          {AppleGame, trees: [{4, 2}, {5, 2}, {6, 2}], apples: 3, tick: :manual, save: 3_600_000}

        world = start_world(store, game)
        {:ok, id, _} = World.join(world, at: {5, 3})
        assert act(world, id, :pick, :n) == {:ok, %{carrying: 1}}
        assert :ok = Saver.save_now(saver(world))
        assert World.stats(world).game_bases_saved == 1

        # Picks and drops on four cells in all, a save after each.
        steps = [
          n: :pick,
          n: :pick,
          e: :drop,
          e: :drop,
          e: :drop,
          ne: :pick,
          ne: :pick,
          ne: :pick
        ]

        steps = steps ++ [e: :drop, e: :drop, e: :drop, nw: :pick]

        for {direction, action} <- steps do
          assert {:ok, _} = act(world, id, action, direction)
          assert :ok = Saver.save_now(saver(world))
        end

        assert %{game_zones_saved: 13, game_bases_saved: 1} = World.stats(world)
        assert {:ok, _} = act(world, id, :pick, :nw)
        assert :ok = Saver.save_now(saver(world))
        assert %{game_zones_saved: 14, game_bases_saved: 2} = World.stats(world)
        layer = World.Game.layer(World.fetch!(world), 0)
        stop_world(world)

        assert World.Game.layer(World.fetch!(start_world(store, game)), 0) == layer
      end

      test "the last changes are saved as the world stops", %{store: store} do
        world = start_world(store)
        {:ok, id, _} = World.join(world, at: {11, 5})
        assert act(world, id, :pick, :w) == {:ok, %{carrying: 1}}
        stop_world(world)

        again = start_world(store)
        assert World.cell(again, {10, 5}) == {{:tree, 0}, 0}
      end

      # The apple game again, of version `version`, as a new release (or a
      # live reload) of one game would be: the same module, compiled again.
      defp apple_game(version, upgrade) do
        module = Module.concat(__MODULE__, Apples)
        :code.purge(module)
        :code.delete(module)

        upgrade =
          if upgrade,
            do: """
            def upgrade(:cell, {:tree, n}, 0), do: {:tree, n, :v2}
            def upgrade(_what, value, _from), do: value
            """,
            else: ""

        Code.compile_string("""
        defmodule #{inspect(module)} do
          @behaviour Grove.Game
          defdelegate actions(), to: Grove.AppleGame
          defdelegate init(options), to: Grove.AppleGame
          defdelegate act(act, area), to: Grove.AppleGame
          defdelegate cell(cell, ground, config), to: Grove.AppleGame
          defdelegate join(entity, info, area), to: Grove.AppleGame
          def version, do: #{version}
          #{upgrade}
        end
        """)

        {module, trees: [{9, 5}, {10, 5}], tick: :manual, save: 3_600_000}
      end

      test "a save of another version of the game is upgraded, or laid anew without upgrade/3",
           %{store: store} do
        world = start_world(store, apple_game(0, false))
        {:ok, id, _} = World.join(world, at: {8, 5})
        {:ok, _} = act(world, id, :pick, :e)
        :ok = Saver.save_now(saver(world))
        stop_world(world)

        # Version 2: trees hold their apples as {:tree, n, :v2}, from version 0's by upgrade/3.
        again = start_world(store, apple_game(2, true))
        assert World.cell(again, {9, 5}) == {{:tree, 0, :v2}, 0}
        stop_world(again)

        # A version 3 without upgrade/3 cannot read it: the zone is laid anew, and the log says why.
        log =
          ExUnit.CaptureLog.capture_log(fn ->
            third = start_world(store, apple_game(3, false))
            assert World.cell(third, {9, 5}) == {{:tree, 1}, 0}
          end)

        assert log =~ "version 0 of the game, which runs 3 and has no upgrade/3"
      end

      test "tallies add up, are written, and are read back by name, best first", %{store: store} do
        {:ok, ada} = Grove.Store.create_account(store, %{name: "ada"})
        {:ok, bob} = Grove.Store.create_account(store, %{name: "bob"})
        world = start_world(store)
        tally = World.fetch!(world).tally

        World.Game.tally(World.fetch!(world), [
          {:apples, ada.id, 2},
          {:apples, bob.id, 5},
          {:apples, ada.id, 1}
        ])

        :ok = Tally.flush(tally)

        assert World.Game.board(world) == %{"board" => :null, "top" => []},
               "the apple game names no board in its legend"

        assert Tally.top(tally, :apples, 10) == [
                 %{"name" => "bob", "score" => 5},
                 %{"name" => "ada", "score" => 3}
               ]

        # Another node's share, as its tally would have written it.
        scope = "tally/" <> World.Game.save_scope(World.fetch!(world)) <> "/apples"
        stop_world(world)
        four = :erlang.term_to_binary(4)
        :ok = Grove.Store.save_state(store, scope, [{"i:#{ada.id}@other@host", four}])

        again = start_world(store)
        tally = World.fetch!(again).tally
        # A board is loaded the first time it is read.
        assert Tally.top(tally, :apples, 10) == []

        eventually(fn ->
          assert Tally.top(tally, :apples, 10) == [
                   %{"name" => "ada", "score" => 7},
                   %{"name" => "bob", "score" => 5}
                 ]
        end)

        World.Game.tally(World.fetch!(again), [{:apples, bob.id, 3}])
        :ok = Tally.flush(tally)
        assert Tally.top(tally, :apples, 1) == [%{"name" => "bob", "score" => 8}]
      end
    end
  end
end

defmodule Grove.World.GameSavesSQLiteTest do
  use Grove.StoreCase, adapter: :sqlite, async: true
  use Grove.World.GameSavesTest.Cases
end

defmodule Grove.World.GameSavesPostgresTest do
  use Grove.StoreCase, adapter: :postgres, async: true
  use Grove.World.GameSavesTest.Cases
end
