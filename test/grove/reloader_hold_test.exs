defmodule Grove.ReloaderHoldTest do
  @moduledoc """
  Live reload of a game whose state changes shape: the zones are held from
  before the new code loads to after their state is upgraded, so an action
  is answered either by the old code on the old state or by the new code
  on the upgraded state, never by the new code on the old; an upgrade that
  fails leaves every zone on the old code and state; a zone that does not
  answer in time puts the reload off, and is not left held.

  The reload is stopped in its middle by the new code itself, which waits
  for the test's word: once loaded (a line of the file after its module,
  run by the compiler), and in each zone's upgrade. Nothing waits on time.
  """
  # Code loading is global: one test at a time.
  use ExUnit.Case, async: false

  import Grove.PropCase

  alias Grove.{Reloader, World}
  alias Grove.World.Stats

  # Refusals are logged as errors, as a developer must see them.
  @moduletag :capture_log

  @game Grove.ReloaderHoldTest.Count

  # The game: `count` counts on the actor's cell, in an integer (version
  # 0) or, from version 1, in `{:count, n}`. Each answer says which code
  # answered, on which shape: "old" (version 0), "new" (version 1, on the
  # new shape) or "unconverted" (version 1 on an integer: what must never
  # happen). `upgrade` is the body of the clause that converts an integer.
  defp source(0) do
    """
    defmodule #{inspect(@game)} do
      @behaviour Grove.Game
      alias Grove.Game.{Act, Area}

      def actions, do: %{count: []}
      # One cell of zone 0 that a failing upgrade may refuse.
      def cell({0, 0}, _ground, _config), do: -1
      def cell(_cell, _ground, _config), do: 0

      def act(%Act{name: :count, target: here}, area) do
        n = Area.cell(area, here)
        {:ok, %{code: "old", n: n + 1}, [{:cell, here, n + 1}]}
      end
    end
    """
  end

  defp source(1, upgrade, after_load \\ "") do
    """
    defmodule #{inspect(@game)} do
      @behaviour Grove.Game
      alias Grove.Game.{Act, Area}

      def actions, do: %{count: []}
      def version, do: 1
      def cell(_cell, _ground, _config), do: {:count, 0}

      def act(%Act{name: :count, target: here}, area) do
        case Area.cell(area, here) do
          {:count, n} -> {:ok, %{code: "new", n: n + 1}, [{:cell, here, {:count, n + 1}}]}
          n when is_integer(n) -> {:ok, %{code: "unconverted", n: n + 1}, [{:cell, here, n + 1}]}
        end
      end

      def upgrade(:cell, n, 0) when is_integer(n), do: #{upgrade}
      def upgrade(_what, term, _from), do: term
    end

    #{after_load}
    """
  end

  @doc false
  # Called by the new code in the middle of a reload: tells the test where
  # it is (`{stage, pid}`) and waits for its word. `once` is a key: a zone
  # waits at its first upgraded cell only.
  def wait(test, stage, once \\ nil) do
    if once == nil or Process.put(once, true) == nil do
      send(test, {stage, self()})

      receive do
        {:go, ^stage} -> :ok
      end
    end
  end

  setup context do
    dir = dir()
    on_exit(fn -> File.rm_rf(dir) end)
    on_exit(fn -> forget_game() end)
    start_world(dir, context)
  end

  defp dir do
    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-reload-hold-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)
    dir
  end

  defp forget_game do
    :code.purge(@game)
    :code.delete(@game)
  end

  # A world of four zones running the game's version 0, an actor of the
  # test's in zone 0, and a reloader looking at `dir` when the test says,
  # compiling file by file.
  defp start_world(dir, context) do
    file = Path.join(dir, "count.ex")
    File.write!(file, source(0))
    # Compiled again for each world: no warning for it.
    quiet = Code.get_compiler_option(:ignore_module_conflict)
    Code.put_compiler_option(:ignore_module_conflict, true)
    Code.compile_file(file)
    Code.put_compiler_option(:ignore_module_conflict, quiet)
    name = :"reload_hold_test_#{System.unique_integer([:positive])}"

    grove = {
      Grove,
      # The hold's bound is far beyond what a zone takes, unless a test says.
      name: name,
      world:
        [
          width: 20,
          height: 20,
          zone_size: 10,
          tick: 50,
          terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
          game: {@game, tick: :manual},
          # Actions as fast as the test sends them.
          rules: [move_rate: nil]
        ] ++ if(context[:on_demand], do: [zones: :on_demand, zone_idle: :manual], else: []),
      gateway: false,
      status_interval: false,
      reload: [
        paths: [dir],
        compile: :files,
        interval: 3_600_000,
        hold_timeout: Map.get(context, :hold_timeout, 60_000)
      ]
    }

    start_supervised!(Supervisor.child_spec(grove, id: name))
    world = Grove.world(name)
    {:ok, id, {2, 2}} = World.join(world, at: {2, 2})
    %{name: name, world: world, id: id, source: file, reloader: :"#{name}.Reloader"}
  end

  defp count(world, id, tag) do
    :ok = World.act(world, id, :count, :here, %{}, tag)
  end

  defp answer(id, tag) do
    assert_receive {:grove_act, ^id, ^tag, {:ok, data}}, 5000
    {data.code, data.n}
  end

  defp zones(world), do: Tuple.to_list(World.fetch!(world).zones) |> Enum.map(&Process.whereis/1)

  test "an action during a reload is answered by the old code on the old state or the new on the new, never the new on the old",
       %{world: world, id: id, source: file, reloader: reloader} do
    count(world, id, :before)
    assert answer(id, :before) == {"old", 1}

    test = ":erlang.list_to_pid(#{inspect(:erlang.pid_to_list(self()))})"
    wait = "#{inspect(__MODULE__)}.wait(#{test}"

    File.write!(
      file,
      source(
        1,
        "(#{wait}, :upgrading, :upgraded); {:count, n})",
        "#{wait}, :loaded)"
      )
    )

    reload = Task.async(fn -> Reloader.check(reloader) end)

    # The new code is loaded and no zone has upgraded yet: the moment an
    # action would run the new `act/2` on an integer, were the zones not held.
    assert_receive {:loaded, compiler}, 5000
    count(world, id, :loaded)
    send(compiler, {:go, :loaded})

    # Every zone is upgrading: the new state is not theirs yet.
    upgrading = for _zone <- zones(world), do: assert_receive({:upgrading, zone}, 5000) && zone
    assert Enum.sort(upgrading) == Enum.sort(zones(world))
    count(world, id, :upgrading)
    for zone <- upgrading, do: send(zone, {:go, :upgrading})

    assert Task.await(reload, 10_000) == {:ok, [@game]}

    # What waited is answered after, by the new code on the upgraded
    # state, in order, and nothing counted twice or lost.
    assert answer(id, :loaded) == {"new", 2}
    assert answer(id, :upgrading) == {"new", 3}
    count(world, id, :after)
    assert answer(id, :after) == {"new", 4}
    assert World.cell(world, {2, 2}) == {{:count, 4}, 0}
    # Every zone took the new shape, the ones nobody acted in too.
    assert World.cell(world, {15, 15}) == {{:count, 0}, 0}
    refute_received {:grove_act, ^id, _, _}
  end

  test "an upgrade that fails leaves every zone on the old code and the old state",
       %{world: world, id: id, source: file, reloader: reloader} do
    count(world, id, :before)
    assert answer(id, :before) == {"old", 1}
    stats = World.fetch!(world).stats
    refused = Stats.get(stats, :reloads_refused)

    # Zone 0's counted cell cannot be converted; the other zones' can, and
    # upgrade first, or meanwhile.
    File.write!(
      file,
      source(1, "if(n > 0, do: raise(\"no way\"), else: {:count, n})")
    )

    assert {:error, why} = Reloader.check(reloader)
    assert why =~ "#{inspect(@game)}.upgrade/3 failed in zone 0"
    assert why =~ "no way"
    assert Stats.get(stats, :reloads_refused) == refused + 1

    count(world, id, :after)
    assert answer(id, :after) == {"old", 2}
    assert World.Game.spec(world).version == 0

    # Every zone's state as it was: the converted ones went back.
    for cell <- [{2, 2}, {15, 2}, {2, 15}, {15, 15}],
        do: assert({n, 0} = World.cell(world, cell)) && assert(is_integer(n))

    for zone <- zones(world), do: assert(:sys.get_state(zone).game_before == nil)
  end

  @tag hold_timeout: 100
  test "a zone that does not answer in time puts the reload off, and is let go when it answers",
       %{world: world, id: id, source: file, reloader: reloader} do
    stats = World.fetch!(world).stats
    [zone | _] = zones(world)
    test = self()

    # Zone 0 is busy until the test says (it runs this function).
    busy =
      Task.async(fn ->
        :sys.replace_state(zone, fn state ->
          send(test, :busy)

          receive do
            :free -> state
          end
        end)
      end)

    assert_receive :busy, 5000
    File.write!(file, source(1, "{:count, n}"))
    assert {:error, why} = Reloader.check(reloader)
    assert why =~ "zone 0 did not answer within 100 ms"
    assert Stats.get(stats, :reload_zones_late) == 1
    assert Stats.get(stats, :reloads_put_off) == 1
    # The old code runs on.
    assert World.Game.spec(world).version == 0

    # Free, the zone handles what waited (the hold and its release among
    # it): it is not left held, and the old code answers.
    send(zone, :free)
    Task.await(busy)
    count(world, id, :freed)
    assert answer(id, :freed) == {"old", 1}

    # The change was not forgotten: the next look loads it.
    assert Reloader.check(reloader) == {:ok, [@game]}
    count(world, id, :reloaded)
    assert answer(id, :reloaded) == {"new", 2}
  end

  @tag :on_demand
  test "a zone asleep through a reload upgrades its state when it wakes",
       %{world: world, id: id, source: file, reloader: reloader} do
    count(world, id, :before)
    assert answer(id, :before) == {"old", 1}
    # Zone 0 sleeps, its layer and its entity in its tables.
    assert 0 in World.sleep_idle(world)

    File.write!(file, source(1, "{:count, n}"))
    assert Reloader.check(reloader) == {:ok, [@game]}
    # Asleep, it still holds what it held.
    assert World.cell(world, {2, 2}) == {1, 0}

    # The action wakes it, and the new code meets the new shape.
    count(world, id, :woken)
    assert answer(id, :woken) == {"new", 2}
    assert World.cell(world, {2, 2}) == {{:count, 2}, 0}
    assert World.cell(world, {3, 3}) == {{:count, 0}, 0}
  end

  # Actions sent at each point of a reload (before it, once the new code is
  # loaded, while the zones upgrade, after it), by a reload that succeeds
  # or whose upgrade fails in zone 0: each is answered once, in order, by
  # the old code on the old state (before, or when the reload failed) or
  # the new code on the new state (after the load, when it succeeded).
  test "wherever an action falls in a reload that succeeds or fails, it is answered once, by old code on old state or new on new" do
    stage = :proper_types.oneof([:before, :loaded, :upgrading, :after])

    property =
      forall({:proper_types.list(stage), :proper_types.boolean()}, fn {stages, fails} ->
        dir = dir()
        context = start_world(dir, %{})

        try do
          reload_with(context, stages, fails)
        after
          stop_supervised!(context.name)
          File.rm_rf(dir)
        end
      end)

    check(property, numtests: 15, max_shrinks: 20)
  end

  defp reload_with(%{world: world, id: id, source: file, reloader: reloader}, stages, fails) do
    plan = Enum.frequencies(stages)
    test = ":erlang.list_to_pid(#{inspect(:erlang.pid_to_list(self()))})"
    wait = "#{inspect(__MODULE__)}.wait(#{test}"
    refuse = if fails, do: "n < 0", else: "false"

    File.write!(
      file,
      source(
        1,
        "(#{wait}, :upgrading, :upgraded); if(#{refuse}, do: raise(\"no\"), else: {:count, n}))",
        "#{wait}, :loaded)"
      )
    )

    send_at = fn stage ->
      for k <- 1..Map.get(plan, stage, 0)//1, do: count(world, id, {stage, k}) && {stage, k}
    end

    before = send_at.(:before)
    reload = Task.async(fn -> Reloader.check(reloader) end)
    assert_receive {:loaded, compiler}, 5000
    loaded = send_at.(:loaded)
    send(compiler, {:go, :loaded})
    upgrading = for _zone <- zones(world), do: assert_receive({:upgrading, zone}, 5000) && zone
    during = send_at.(:upgrading)
    for zone <- upgrading, do: send(zone, {:go, :upgrading})

    case Task.await(reload, 10_000) do
      {:ok, [@game]} -> refute fails
      {:error, why} -> assert fails and why =~ "upgrade/3 failed in zone 0"
    end

    sent = before ++ loaded ++ during ++ send_at.(:after)

    for {{stage, _k} = tag, n} <- Enum.with_index(sent, 1) do
      code = if stage == :before or fails, do: "old", else: "new"
      assert answer(id, tag) == {code, n}
    end

    refute_received {:grove_act, _, _, _}
    true
  end
end
