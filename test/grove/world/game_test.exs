defmodule Grove.World.GameTest do
  @moduledoc "A game in a running world: actions through the client API, its state in ETS, views, failures."
  use Grove.WorldCase, async: true

  import ExUnit.CaptureLog
  import Grove.PropCase

  alias Grove.AppleGame
  alias Grove.World
  alias Grove.World.View

  # Zones of 10 x 10: a tree on each side of the border between zones 0
  # and 1, a basket in zone 0.
  @game {AppleGame, trees: [{9, 5}, {10, 5}], baskets: [{5, 5}], tick: :manual}

  defp join(world, cell, info \\ %{account: 1}) do
    {:ok, id, ^cell} = World.join(world, at: cell, info: info)
    id
  end

  @tag world: [game: @game]
  test "an entity picks, carries and delivers, and anyone reads the state from ETS", %{
    world: world
  } do
    id = join(world, {8, 5})
    assert World.attrs(world, id) == {%{carrying: 0, score: 0, account: 1}, 0}
    assert World.cell(world, {9, 5}) == {{:tree, 1}, 1}

    assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
    assert World.cell(world, {9, 5}) == {{:tree, 0}, 0}
    assert World.attrs(world, id) == {%{carrying: 1, score: 0, account: 1}, 1}
    assert act(world, id, "pick", :e) == {:refused, :no_apples}

    :ok = World.move(world, id, :w, :m1)
    assert {:ok, {7, 5}} = assert_outcome(id, :m1)
    :ok = World.move(world, id, :w, :m2)
    assert {:ok, {6, 5}} = assert_outcome(id, :m2)
    assert act(world, id, :deliver, {5, 5}) == {:ok, %{score: 1}}
    assert World.attrs(world, id) == {%{carrying: 0, score: 1, account: 1}, 0}
  end

  @tag world: [game: @game]
  test "an action toward a cell of another zone runs there", %{world: world} do
    id = join(world, {9, 6})
    assert act(world, id, :pick, :ne) == {:ok, %{carrying: 1}}
    assert World.cell(world, {10, 5}) == {{:tree, 0}, 0}
    assert World.cell(world, {9, 5}) == {{:tree, 1}, 1}
    assert World.attrs(world, id) == {%{carrying: 1, score: 0, account: 1}, 1}
    # Its zone answered, and keeps the entity and its attributes.
    assert %{entities: %{^id => %{attrs: %{carrying: 1}}}} =
             :sys.get_state(World.zone_pid(world, 0)).core
  end

  @tag world: [game: @game]
  test "attributes travel with an entity across zones, and a restarted zone keeps layer and attributes",
       %{world: world} do
    id = join(world, {8, 6})
    {:ok, %{carrying: 1}} = act(world, id, :pick, :ne)
    :ok = World.move(world, id, :e, :m1)
    assert {:ok, {9, 6}} = assert_outcome(id, :m1)
    :ok = World.move(world, id, :e, :m2)
    assert {:ok, {10, 6}} = assert_outcome(id, :m2)
    assert World.attrs(world, id) == {%{carrying: 1, score: 0, account: 1}, 1}

    assert %{entities: %{^id => %{attrs: %{carrying: 1}, look: 1}}} =
             :sys.get_state(World.zone_pid(world, 1)).core

    for index <- [0, 1] do
      pid = World.zone_pid(world, index)
      ref = Process.monitor(pid)
      Process.exit(pid, :kill)
      assert_receive {:DOWN, ^ref, :process, ^pid, :killed}

      eventually(fn ->
        assert is_pid(World.zone_pid(world, index)) and World.zone_pid(world, index) != pid
      end)
    end

    assert World.cell(world, {9, 5}) == {{:tree, 0}, 0}

    assert %{entities: %{^id => %{attrs: %{carrying: 1}, look: 1}}} =
             :sys.get_state(World.zone_pid(world, 1)).core

    assert act(world, id, :pick, :n) == {:ok, %{carrying: 2}}
  end

  @tag world: [game: @game]
  test "a failing action costs that action alone: answered interrupted, logged once, the zone carries on",
       %{world: world} do
    id = join(world, {3, 3})
    zone = World.zone_pid(world, 0)

    log =
      capture_log(fn ->
        assert act(world, id, :crash, :here) == {:rejected, :interrupted}
        # A flood of them: every one answered, the same zone, the world up.
        for _ <- 1..300, do: assert(act(world, id, :crash, :here) == {:rejected, :interrupted})
        assert act(world, id, :bad, :here) == {:rejected, :interrupted}
        :sys.get_state(zone)
      end)

    assert [line] = String.split(log, "\n", trim: true) |> Enum.filter(&(&1 =~ "Grove.AppleGame"))
    assert line =~ "act failed in zone 0"
    assert line =~ "the apple game crashes on purpose"
    assert World.zone_pid(world, 0) == zone
    assert World.stats(world).game_failures == 302
    :ok = World.move(world, id, :e, :after)
    assert {:ok, {4, 3}} = assert_outcome(id, :after)
    assert World.attrs(world, id) == {%{carrying: 0, score: 0, account: 1}, 0}
  end

  @tag world: [game: @game]
  test "unknown actions, bad arguments and targets out of reach are refused and change nothing",
       %{world: world} do
    id = join(world, {8, 5})
    before = {World.attrs(world, id), World.cell(world, {9, 5})}

    assert act(world, id, :fly, :here) == {:rejected, :unknown_action}
    assert act(world, id, "fly", :here) == {:rejected, :unknown_action}
    assert act(world, id, :drop, :here, %{count: 9}) == {:rejected, :bad_args}
    assert act(world, id, :drop, :here, %{"count" => "one"}) == {:rejected, :bad_args}
    assert act(world, id, :drop, :here, %{count: 1, extra: true}) == {:rejected, :bad_args}

    assert act(world, id, :shout, :here, %{text: String.duplicate("a", 17)}) ==
             {:rejected, :bad_args}

    assert act(world, id, :pick, {10, 5}) == {:rejected, :out_of_reach}
    assert act(world, id, :pick, :nowhere) == {:rejected, :out_of_reach}
    assert act(world, id + 1000, :pick, :e) == {:rejected, :unknown_entity}

    assert {World.attrs(world, id), World.cell(world, {9, 5})} == before
    assert act(world, id, :shout, :here, %{"text" => "hi"}) == {:ok, %{heard: true}}
  end

  @tag world: [game: @game]
  test "viewers see the game's cells, the entities' looks and the events", %{world: world} do
    {:ok, viewer, _} = World.join(world, at: {2, 2}, updates: :view, view_radius: 4)
    view = receive_snapshots(View.new({2, 2}, 4, viewer), 1)
    assert View.game_cells(view) == %{{5, 5} => 2, {9, 5} => 1}

    id = join(world, {8, 5})
    assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
    assert act(world, id, :shout, :here, %{text: "hello"}) == {:ok, %{heard: true}}

    view = catch_up_until(world, view, fn view -> length(view.events) == 2 end)
    assert View.game_cells(view) == %{{5, 5} => 2}
    assert View.looks(view)[id] == 1
    {events, view} = View.take_events(view)

    assert [{^id, 9, 5, :picked, %{left: 0}}, {^id, 8, 5, :shout, %{text: "hello", loud: false}}] =
             events

    assert {[], _view} = View.take_events(view)
  end

  @tag world: [game: @game]
  test "the game's tick runs in every zone", %{world: world} do
    id = join(world, {8, 5})
    {:ok, _} = act(world, id, :pick, :e)
    World.Game.tick(world)
    eventually(fn -> assert World.cell(world, {9, 5}) == {{:tree, 1}, 1} end)
  end

  @lazy {Grove.LazyApples, trees: [{9, 5}], tick: :manual, catch_up: 100}

  @tag world: [game: @lazy]
  test "a zone nobody watches owes its ticks, and a viewer's snapshot shows them run", %{
    world: world
  } do
    id = join(world, {8, 5})
    assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
    World.Game.tick(world)
    World.Game.tick(world)
    zone = World.zone_pid(world, 0)
    assert Grove.World.Zone.Game.owed(:sys.get_state(zone).core) == 2
    # Read without asking the zone, the tree lags by what it owes.
    assert World.cell(world, {9, 5}) == {{:tree, 0}, 0}

    # Someone comes to look from the next zone: zone 0 runs the two ticks
    # before its snapshot.
    {:ok, viewer, _} = World.join(world, at: {13, 5}, updates: :view, view_radius: 4)
    view = receive_snapshots(View.new({13, 5}, 4, viewer), 2)
    assert View.game_cells(view)[{9, 5}] == 1
    assert World.cell(world, {9, 5}) == {{:tree, 2}, 1}
    assert Grove.World.Zone.Game.owed(:sys.get_state(zone).core) == 0

    # Watched, the zone runs its ticks when they fall due.
    World.Game.tick(world)
    :sys.get_state(zone)
    assert World.cell(world, {9, 5}) == {{:tree, 3}, 1}
  end

  @tag world: [game: @lazy]
  test "a zone nobody watches runs the ticks it owes before an action", %{world: world} do
    id = join(world, {8, 5})
    assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
    assert act(world, id, :pick, :e) == {:refused, :no_apples}
    World.Game.tick(world)
    World.Game.tick(world)
    # Without them, the tree would have no apple to give.
    assert act(world, id, :pick, :e) == {:ok, %{carrying: 2}}
    assert World.cell(world, {9, 5}) == {{:tree, 1}, 1}
  end

  @tag world: [game: put_elem(@lazy, 1, Keyword.put(elem(@lazy, 1), :catch_up, 3))]
  test "a zone nobody watches runs its ticks once it owes :catch_up of them", %{world: world} do
    id = join(world, {8, 5})
    assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
    zone = World.zone_pid(world, 0)

    for owed <- [1, 2] do
      World.Game.tick(world)
      assert Grove.World.Zone.Game.owed(:sys.get_state(zone).core) == owed
      assert World.cell(world, {9, 5}) == {{:tree, 0}, 0}
    end

    World.Game.tick(world)
    :sys.get_state(zone)
    assert World.cell(world, {9, 5}) == {{:tree, 3}, 1}
  end

  # The zone's own ticks a minute apart: what waits for one is not published
  # yet. A tree in zone 0, watched by one viewer; one in zone 1, by two.
  @tag world: [
         tick: 60_000,
         game: {AppleGame, trees: [{5, 5}, {15, 5}], apples: 0, tick: :manual}
       ]
  test "a game's tick in a zone with one viewer publishes what it changed in its own turn; with two, at the tick",
       %{world: world} do
    [alone, shared] = for index <- [0, 1], do: World.zone_pid(world, index)
    {:ok, _viewer, _} = World.join(world, at: {3, 3}, updates: :view, view_radius: 1)
    assert_receive {:grove_view, 0, :snapshot, seq, _}

    clients =
      for cell <- [{13, 3}, {16, 3}] do
        {pid, _id, _cell} = spawn_client(world, at: cell, updates: :view, view_radius: 1)
        pid
      end

    shared_seq = :sys.get_state(shared).views.seq
    World.Game.tick(world)

    # Each tree grew its first apple, which shows.
    assert %{views: %{seq: seq_now}, tick_timer: nil} = :sys.get_state(alone)
    assert seq_now == seq + 1
    assert {[{"", "", %{cells: [{5, 5, 1}]}}], _} = World.view_deltas(world, 0, seq, {View, :raw})

    assert %{views: %{seq: ^shared_seq}, tick_timer: timer} = :sys.get_state(shared)
    assert timer != nil
    # A view tick's timer that went off as it was cancelled is let be: the
    # zone keeps the one it set since.
    send(shared, {:timeout, make_ref(), :tick})
    assert %{views: %{seq: ^shared_seq}, tick_timer: ^timer} = :sys.get_state(shared)
    assert World.cell(world, {15, 5}) == {{:tree, 1}, 1}
    for pid <- clients, do: Process.exit(pid, :kill)
  end

  # The game ticks every 2 s; its timer, where one viewer watches, half a
  # second after each tick.
  @tag world: [game: {AppleGame, trees: [{5, 5}], apples: 0, tick: 2000}]
  test "a game's tick that falls due while a zone's only viewer walks runs in that viewer's move, not on its timer",
       %{world: world} do
    zone = World.zone_pid(world, 0)
    {:ok, me, _} = World.join(world, at: {3, 3}, updates: :view, view_radius: 1)
    assert_receive {:grove_view, 0, :snapshot, _seq, _}
    # The game's timers the zone gets, counted by a tracer of its own.
    tracer = spawn_link(fn -> count_game_timers(zone, 0) end)
    :erlang.trace(zone, true, [:receive, {:tracer, tracer}])

    # Steps back and forth, each waiting for its outcome, until the tree's
    # first apple shows.
    steps =
      Stream.cycle([:e, :w])
      |> Stream.with_index()
      |> Enum.reduce_while(0, fn {direction, tag}, steps ->
        :ok = World.move(world, me, direction, tag)
        assert {:ok, _} = assert_outcome(me, tag)

        if World.cell(world, {5, 5}) == {{:tree, 1}, 1},
          do: {:halt, steps + 1},
          else: {:cont, steps + 1}
      end)

    assert steps > 0
    :erlang.trace(zone, false, [:receive])
    # Every message traced so far is with the tracer.
    delivered = :erlang.trace_delivered(zone)
    assert_receive {:trace_delivered, ^zone, ^delivered}
    send(tracer, {:count, self()})
    assert_receive {:game_timers, 0}
  end

  # A game whose tick counts up on two cells, and whose `enter/2` keeps,
  # as the entity's attributes, the count of the cell it steps onto.
  defmodule Counts do
    @moduledoc false
    @behaviour Grove.Game

    alias Grove.Game.Area

    @impl true
    def actions, do: %{}

    @impl true
    def act(_act, _area), do: {:error, :nothing}

    @impl true
    def cell(cell, _ground, _config) when cell in [{3, 3}, {4, 3}], do: 0
    def cell(_cell, _ground, _config), do: nil

    @impl true
    def tick(area, _roll), do: for({cell, n} <- Area.cells(area), do: {:cell, cell, n + 1})

    @impl true
    def enter(entity, area), do: [{:attrs, entity.id, Area.cell(area, {entity.x, entity.y})}]
  end

  # A move of the zone's only viewer that comes after a tick fell due
  # runs the tick first: the cell it steps onto is as the tick left it.
  @tag world: [game: {Counts, tick: 2000}]
  test "a move of a zone's only viewer after its game's tick fell due comes after the tick",
       %{world: world} do
    {:ok, me, _} = World.join(world, at: {3, 3}, updates: :view, view_radius: 1)
    assert_receive {:grove_view, 0, :snapshot, _seq, _}

    # Steps back and forth, each waiting for its outcome, until the first
    # tick shows on the cell it stands on.
    cell =
      Stream.cycle([{:e, {4, 3}}, {:w, {3, 3}}])
      |> Stream.with_index()
      |> Enum.reduce_while(nil, fn {{direction, cell}, tag}, nil ->
        :ok = World.move(world, me, direction, tag)
        assert {:ok, ^cell} = assert_outcome(me, tag)
        if World.cell(world, cell) == {1, 0}, do: {:halt, cell}, else: {:cont, nil}
      end)

    # `enter/2` saw the tick's count where the entity stepped.
    assert World.cell(world, cell) == {1, 0}
    assert World.attrs(world, me) == {1, 0}
  end

  defp count_game_timers(zone, count) do
    receive do
      {:trace, ^zone, :receive, {:timeout, _, :game_tick}} -> count_game_timers(zone, count + 1)
      {:trace, ^zone, :receive, _message} -> count_game_timers(zone, count)
      {:count, to} -> send(to, {:game_timers, count})
    end
  end

  @tag world: [game: {Grove.LazyApples, trees: [{9, 5}], tick: 1000, catch_up: 100}]
  test "a zone nobody watches has no timer at each tick of its game, but one at :catch_up ticks owed",
       %{world: world} do
    id = join(world, {8, 5})
    zone = World.zone_pid(world, 0)
    # Its next wake is the tick at which it owes 100, some 100 s away.
    assert Process.read_timer(:sys.get_state(zone).game_timer) > 50_000
    # What it owes is counted on the clock when someone acts there.
    assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
    assert Grove.World.Zone.Game.owed(:sys.get_state(zone).core) < 100

    # Watched, its timer goes off at the next tick: by one viewer, a
    # quarter of an interval after it.
    {:ok, viewer, _} = World.join(world, at: {13, 5}, updates: :view, view_radius: 4)
    receive_snapshots(View.new({13, 5}, 4, viewer), 2)
    assert Process.read_timer(:sys.get_state(zone).game_timer) <= 1000 + 250

    # Nobody watches any more: back to one wake at :catch_up ticks owed.
    :ok = World.leave(world, viewer)
    eventually(fn -> assert Process.read_timer(:sys.get_state(zone).game_timer) > 50_000 end)
  end

  @tag world: [game: {Grove.LazyApples, trees: [{9, 5}], tick: 1000, catch_up: 100}]
  test "zones nobody watches wake for their game on the whole second, whatever their phase", %{
    world: world
  } do
    # Zones 1, 5 and 10 of 16 tick at 62, 312 and 625 ms past the second
    # where someone watches.
    for index <- [1, 5, 10], do: assert_due_at(world, index, 0)

    # Watched, zone 1 ticks at its own phase again; by one viewer, its
    # timer a quarter of an interval later (that viewer's move may run
    # the tick first).
    {:ok, viewer, _} = World.join(world, at: {13, 5}, updates: :view, view_radius: 1)
    receive_snapshots(View.new({13, 5}, 1, viewer), 1)
    assert_due_at(world, 1, 62 + 250)

    # A second viewer: the timer is set for the tick itself again.
    {other, _id, _cell} = spawn_client(world, at: {16, 5}, updates: :view, view_radius: 1)
    assert_due_at(world, 1, 62)
    Process.exit(other, :kill)
  end

  # The zone's game timer goes off `phase` ms past a whole second: read
  # as the time left between two readings of the clock, which a busy
  # machine may set far apart, within the timer's rounding of a
  # millisecond either way.
  defp assert_due_at(world, index, phase) do
    timer = :sys.get_state(World.zone_pid(world, index)).game_timer
    before = System.monotonic_time(:millisecond)
    left = Process.read_timer(timer)
    late = System.monotonic_time(:millisecond)
    {earliest, latest} = {before + left - 1 - phase, late + left + 1 - phase}
    assert Integer.floor_div(latest, 1000) * 1000 >= earliest
  end

  @tag world: [game: @game]
  test "actions in a batch are answered together", %{world: world} do
    a = join(world, {8, 5})
    b = join(world, {8, 4})

    :ok =
      World.act_many(world, [
        {a, :pick, :e, %{}, :a},
        {b, :pick, :se, %{}, :b},
        {b, :fly, :here, %{}, :c}
      ])

    outcomes = receive_acts(3, %{})
    assert outcomes[:c] == {:rejected, :unknown_action}

    assert Enum.sort([outcomes[:a], outcomes[:b]]) == [
             {:ok, %{carrying: 1}},
             {:refused, :no_apples}
           ]
  end

  @tag world: [game: @game]
  test "a zone's moves and actions in one batch are answered in one message, moves first", %{
    world: world
  } do
    picker = join(world, {8, 5})
    walker = join(world, {3, 3})
    # In zone 1: its move gets a message of its own.
    other = join(world, {15, 5})

    :ok =
      World.step_many(
        world,
        [{walker, :e, :walked}, {other, :s, :other}, {picker, :n, :moved}],
        [{picker, :pick, :e, %{}, :picked}, {walker, :fly, :here, %{}, :flew}]
      )

    # An action the game does not have is refused at once, as by
    # `act_many/2`; zone 0 answers the rest in one message.
    assert_receive {:grove_steps, [{^walker, :flew, {:rejected, :unknown_action}}]}, 1000
    assert_receive {:grove_steps, outcomes}, 1000
    outcomes = Map.new(outcomes, fn {_id, tag, outcome} -> {tag, outcome} end)

    # The picker moved north first: east of it now is no tree.
    assert outcomes == %{
             walked: {:ok, {4, 3}},
             moved: {:ok, {8, 4}},
             picked: {:refused, :not_a_tree}
           }

    assert_receive {:grove_moves, [{^other, :other, {:ok, {15, 6}}}]}, 1000
    refute_received {:grove_acts, _}
    refute_received {:grove_steps, _}
  end

  @tag world: [game: @game]
  test "a zone's moves in a batch with actions are taken in the order they came", %{
    world: world
  } do
    # Two pairs in zone 0, each pair's moves to the cell between them: the
    # move that came first takes it, whichever entity it is.
    {a, b} = {join(world, {2, 2}), join(world, {4, 2})}
    {c, d} = {join(world, {2, 7}), join(world, {4, 7})}
    picker = join(world, {8, 5})

    :ok =
      World.step_many(
        world,
        [{a, :e, :a_first}, {b, :w, :b_second}, {d, :w, :d_first}, {c, :e, :c_second}],
        [{picker, :pick, :e, %{}, :picked}]
      )

    assert_receive {:grove_steps, outcomes}, 1000
    outcomes = Map.new(outcomes, fn {_id, tag, outcome} -> {tag, outcome} end)

    assert outcomes == %{
             a_first: {:ok, {3, 2}},
             b_second: {:rejected, :occupied},
             d_first: {:ok, {3, 7}},
             c_second: {:rejected, :occupied},
             picked: {:ok, %{carrying: 1}}
           }

    assert World.position(world, a) == {3, 2}
    assert World.position(world, d) == {3, 7}
  end

  test "a world without a game refuses actions", %{world: world} do
    {:ok, id, _} = World.join(world)
    assert act(world, id, :pick, :here) == {:rejected, :disabled}
    assert World.cell(world, {0, 0}) == nil
  end

  defp receive_acts(0, acc), do: acc

  defp receive_acts(n, acc) do
    receive do
      {:grove_acts, outcomes} ->
        Enum.reduce(outcomes, {n, acc}, fn {_id, tag, outcome}, {n, acc} ->
          {n - 1, Map.put(acc, tag, outcome)}
        end)
        |> then(fn {n, acc} -> receive_acts(n, acc) end)

      {:grove_act, _id, tag, outcome} ->
        receive_acts(n - 1, Map.put(acc, tag, outcome))
    after
      1000 -> flunk("only #{map_size(acc)} outcomes came: #{inspect(acc)}")
    end
  end

  defp receive_snapshots(view, 0), do: view

  defp receive_snapshots(view, n) do
    assert_receive {:grove_view, _zone, :snapshot, _seq, _data} = message
    receive_snapshots(View.apply_message(view, message), n - 1)
  end

  defp catch_up_until(world, view, done, tries \\ 200) do
    view = View.catch_up(view, world)

    cond do
      done.(view) ->
        view

      tries == 0 ->
        flunk("the view never got there: #{inspect(view.events)}")

      true ->
        # Ticks are manual here: each makes the zones publish what changed.
        World.tick(world)
        :sys.get_state(World.zone_pid(world, 0))
        catch_up_until(world, view, done, tries - 1)
    end
  end

  # Trees on a fifth of the ground (the game's layer holds one for each),
  # in zones of 10 x 10 on a grid that zones do not divide.
  @tag world: [
         width: 43,
         height: 37,
         game: {AppleGame, baskets: [{5, 5}, {10, 10}, {29, 30}], tick: :manual},
         terrain: [tree_density: 0.2, water_density: 0.0, rock_density: 0.0]
       ]
  test "what an actor senses of the game is what the zones' tables hold around it", %{
    world: world
  } do
    w = World.fetch!(world)
    %Grove.World.Grid{width: width} = w.grid

    layer =
      for table <- Tuple.to_list(w.game_tables),
          {key, value, _code, walk} when is_integer(key) <- :ets.tab2list(table),
          do: {{rem(key, width), div(key, width)}, value, walk}

    assert length(layer) > 100

    check(
      forall(
        {:proper_types.range(-3, 45), :proper_types.range(-3, 39), :proper_types.range(0, 12)},
        fn
          {x, y, radius} ->
            inside = fn {cx, cy} -> abs(cx - x) <= radius and abs(cy - y) <= radius end

            cells = for {cell, value, _walk} <- layer, inside.(cell), into: %{}, do: {cell, value}

            walls =
              for {cell, _value, walk} <- layer,
                  walk != nil,
                  inside.(cell),
                  into: %{},
                  do: {cell, walk}

            assert World.game_near(world, {x, y}, radius) == {cells, walls}
        end
      ),
      numtests: 300
    )
  end
end
