defmodule Grove.ReloaderTest do
  @moduledoc """
  Live reload: a game's source changed in a running server is compiled and
  loaded, and a player who stays connected sees its next action follow
  the new rule; a change of the state's shape goes through `upgrade/3`, and
  one without it, or one that does not compile, is refused with the old
  code kept.
  """
  # Yaws runs one server per node, so these tests share one gateway and run alone.
  use ExUnit.Case, async: false

  import Grove.WsConn, only: [push: 2]

  alias Grove.{Protocol, Reloader, World, WsConn}

  @moduletag :gateway
  # Refusals are logged as errors, as a developer must see them.
  @moduletag :capture_log

  @game Grove.ReloaderTest.Counter
  @kind Grove.ReloaderTest.Stayer
  @racer Grove.ReloaderTest.Racer
  @extra Grove.ReloaderTest.Extra

  # The game, as a developer would write it: `count` counts on the actor's
  # cell and answers with a word. Its count is an integer (`:integer`) or, from
  # version 1, `{:count, n}` (`:tuple`); `extra` adds functions.
  defp source(word, shape, version, extra \\ "") do
    {zero, pattern, next} =
      case shape do
        :integer -> {"0", "n when is_integer(n)", "n + 1"}
        :tuple -> {"{:count, 0}", "{:count, n}", "{:count, n + 1}"}
      end

    """
    defmodule #{inspect(@game)} do
      @behaviour Grove.Game
      alias Grove.Game.{Act, Area}

      def actions, do: %{count: []}
      def version, do: #{version}

      def cell(_cell, _ground, _config), do: #{zero}

      def act(%Act{name: :count, target: here}, area) do
        case Area.cell(area, here) do
          #{pattern} -> {:ok, %{word: "#{word}", n: n + 1}, [{:cell, here, #{next}}]}
        end
      end

      #{extra}
    end
    """
  end

  # An actor kind that stands still and counts its turns, in an integer,
  # or from version 1 in a map.
  defp kind_source(1) do
    """
    defmodule #{inspect(@kind)} do
      @behaviour Grove.Actor
      def init(_opts, _roll), do: 0
      def step(turns, _senses, _roll), do: {:stay, turns + 1}
    end
    """
  end

  defp kind_source(2) do
    """
    defmodule #{inspect(@kind)} do
      @behaviour Grove.Actor
      def version, do: 1
      def upgrade(turns, 0), do: %{turns: turns}
      def init(_opts, _roll), do: %{turns: 0}
      def step(%{turns: turns}, _senses, _roll), do: {:stay, %{turns: turns + 1}}
    end
    """
  end

  # A kind that counts its turns in a map, or from version 1 in
  # `{:turns, n}`. Its version 1 tells the test of any step given a state
  # of the old shape; the file that defines it, once the module is loaded
  # and before the reloader has done anything else, makes every actor of
  # the kind due and has its herd step them (`step_now/1`): the moment a
  # herd could step the new code on states not upgraded yet.
  defp racer_source(0) do
    """
    defmodule #{inspect(@racer)} do
      @behaviour Grove.Actor
      def init(_opts, _roll), do: %{turns: 0}
      def step(%{turns: n}, _senses, _roll), do: {:stay, %{turns: n + 1}}
    end
    """
  end

  defp racer_source(1, actors) do
    test = :erlang.pid_to_list(self())

    """
    defmodule #{inspect(@racer)} do
      @behaviour Grove.Actor
      def version, do: 1
      def upgrade(%{turns: n}, 0), do: {:turns, n}
      def init(_opts, _roll), do: {:turns, 0}
      def step({:turns, n}, _senses, _roll), do: {:stay, {:turns, n + 1}}

      def step(old, _senses, _roll) do
        send(:erlang.list_to_pid(#{inspect(test)}), {:stepped_unconverted, old})
        {:stay, old}
      end
    end

    #{inspect(__MODULE__)}.step_now(#{inspect(actors)}, #{inspect(@racer)})
    """
  end

  @doc false
  # Every actor of `module` due now, and a beat to walk them: each of its
  # herds steps them as soon as it runs (at once, unless it is held).
  def step_now(actors, module) do
    for herd <- Grove.Actors.herds_of(actors), walks?(:sys.get_state(herd), module) do
      :sys.replace_state(herd, fn %Grove.Actors.Herd{wheel: wheel, slot: slot} = herd ->
        entries = Grove.Actors.Herd.Wheel.entries(wheel)

        due =
          Enum.reduce(entries, %{wheel | slots: %{}}, &Grove.Actors.Herd.Wheel.add(&2, slot, &1))

        %{herd | wheel: due, slot: slot - 1, config: %{herd.config | late_ms: 3_600_000}}
      end)

      send(herd, {:beat, :sys.get_state(herd).beat})
      # Walked by now, unless the herd is held.
      :sys.get_state(herd)
    end
  end

  @upgrade """
  def upgrade(:cell, n, 0) when is_integer(n), do: {:count, n}
  def upgrade(_what, term, _from), do: term
  """

  setup_all do
    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-reload-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)
    file = Path.join(dir, "counter.ex")
    File.write!(file, source("hello", :integer, 0))
    Code.compile_file(file)
    kind_file = Path.join(dir, "stayer.ex")
    File.write!(kind_file, kind_source(1))
    Code.compile_file(kind_file)
    racer_file = Path.join(dir, "racer.ex")
    File.write!(racer_file, racer_source(0))
    Code.compile_file(racer_file)

    on_exit(fn ->
      File.rm_rf(dir)

      for module <- [@game, @kind, @racer, @extra] do
        :code.purge(module)
        :code.delete(module)
      end
    end)

    instance =
      Grove.TestInstance.start!("reload",
        world: [
          width: 20,
          height: 20,
          zone_size: 10,
          tick: 50,
          terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
          game: {@game, tick: :manual}
        ],
        actors: [kinds: [{@kind, 4}, {@racer, 4}], interval: 100],
        gateway: [port: 0],
        # Looked at when the test says, compiled file by file.
        reload: [paths: [dir], compile: :files, interval: 3_600_000]
      )

    Map.merge(instance, %{
      file: file,
      kind_file: kind_file,
      racer_file: racer_file,
      reloader: :"#{instance.instance}.Reloader"
    })
  end

  # The next message of `type`, skipping views and stats; never a goodbye.
  defp expect(conn, type) do
    {message, conn} = WsConn.expect(conn, [type, :bye])
    refute message.type == :bye, "the player was sent away: #{inspect(message)}"
    {message, conn}
  end

  defp count(conn, seq) do
    push(conn, %{type: :act, seq: seq, action: "count"})
    {acted, conn} = expect(conn, :acted)
    assert acted.seq == seq
    {acted, conn}
  end

  # The reloader tells a change by the file's digest, not only its time:
  # two writes within a second are two changes.
  defp rewrite(file, source), do: File.write!(file, source)

  test "a changed rule is followed by the next action of a player who stays connected; bad changes are refused",
       %{port: port, file: file, reloader: reloader, world: world} do
    conn = WsConn.connect(port, :json)
    push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""})
    {welcome, conn} = expect(conn, :welcome)

    {acted, conn} = count(conn, 1)
    assert acted.data == %{"word" => "hello", "n" => 1}

    # The rule changes: another word. Loaded, and the next action says it.
    rewrite(file, source("howdy", :integer, 0))
    assert Reloader.check(reloader) == {:ok, [@game]}
    {acted, conn} = count(conn, 2)
    assert acted.data == %{"word" => "howdy", "n" => 2}

    # A file that does not compile: refused, the running code kept.
    rewrite(file, source("broken", :integer, 0, "def oops(, do: 1"))

    # (The compiler says why on the console too, as it does in `make run`.)
    ExUnit.CaptureIO.capture_io(:stderr, fn ->
      assert {:error, "did not compile: " <> _} = Reloader.check(reloader)
    end)

    {acted, conn} = count(conn, 3)
    assert acted.data == %{"word" => "howdy", "n" => 3}

    # The state's shape changes (a count becomes {:count, n}) without upgrade/3: refused.
    rewrite(file, source("shaped", :tuple, 1))
    assert {:error, why} = Reloader.check(reloader)
    assert why =~ "version went from 0 to 1, and it has no upgrade/3"
    {acted, conn} = count(conn, 4)
    assert acted.data == %{"word" => "howdy", "n" => 4}

    # With upgrade/3: the zone's state is brought along, and play goes on from it.
    rewrite(file, source("shaped", :tuple, 1, @upgrade))
    assert Reloader.check(reloader) == {:ok, [@game]}
    {acted, conn} = count(conn, 5)
    assert acted.data == %{"word" => "shaped", "n" => 5}
    assert World.cell(world, {welcome.x, welcome.y}) == {{:count, 5}, 0}

    # The same connection throughout: the same player, still in the world.
    push(conn, %{type: :ping, t: 7})
    {pong, _conn} = expect(conn, :pong)
    assert pong.t == 7
    assert World.position(world, welcome.id) != nil
  end

  # A look walks the directories again only when one of them changed:
  # what it must still see is a file added where there was none, one
  # changed in place, and one gone.
  test "a file added in a new directory is loaded at the next look, changed in place again, and forgotten once removed",
       %{file: file, reloader: reloader} do
    assert Reloader.check(reloader) == {:ok, []}
    extra = Path.join([Path.dirname(file), "more", "extra.ex"])
    File.mkdir_p!(Path.dirname(extra))
    extra_source = &"defmodule #{inspect(@extra)} do\n  def word, do: #{inspect(&1)}\nend\n"
    File.write!(extra, extra_source.(:one))
    # (A module that is neither the game nor a kind is loaded, not listed.)
    assert {:ok, _} = Reloader.check(reloader)
    # (Called through apply/3: the module exists only once the test wrote
    # it, and a direct call warns at compile time that it is undefined.)
    assert apply(@extra, :word, []) == :one

    rewrite(extra, extra_source.(:two))
    assert {:ok, _} = Reloader.check(reloader)
    assert apply(@extra, :word, []) == :two

    File.rm!(extra)
    assert Reloader.check(reloader) == {:ok, []}
    refute Map.has_key?(:sys.get_state(reloader).files, extra)
    assert Map.has_key?(:sys.get_state(reloader).files, file)
  end

  test "an actor kind changed in a running world: its actors' states go through upgrade/2",
       %{kind_file: kind_file, reloader: reloader, instance: instance} do
    actors = Grove.actors(instance)

    states = fn -> states(actors, @kind) end

    Grove.WorldCase.eventually(fn ->
      assert length(states.()) == 4 and Enum.all?(states.(), &is_integer/1)
    end)

    File.write!(kind_file, kind_source(2))
    assert Reloader.check(reloader) == {:ok, [@kind]}
    assert Enum.all?(states.(), &match?(%{turns: n} when is_integer(n), &1))
    assert %{version: 1} = Enum.find(Grove.Actors.kinds(actors), &(&1.module == @kind))
    # And they go on stepping with the new code.
    turns = fn -> states.() |> Enum.map(& &1.turns) |> Enum.sum() end
    before = turns.()
    Grove.WorldCase.eventually(fn -> assert turns.() > before end)
  end

  test "no step of a reloaded kind sees a state its upgrade/2 has not brought along",
       %{racer_file: racer_file, reloader: reloader, instance: instance} do
    actors = Grove.actors(instance)

    Grove.WorldCase.eventually(fn ->
      assert [_, _, _, _] = states = states(actors, @racer)
      assert Enum.all?(states, &is_map/1)
    end)

    File.write!(racer_file, racer_source(1, actors))
    assert Reloader.check(reloader) == {:ok, [@racer]}
    # Every herd of the kind has walked the beat it was sent while the
    # new code was loading.
    states = states(actors, @racer)
    assert [_, _, _, _] = states
    assert Enum.all?(states, &match?({:turns, n} when n > 0, &1))
    refute_received {:stepped_unconverted, _}
  end

  # The states of the actors of `module`, each herd walking actors of any
  # kinds: an entry's last tag has its kind's index in its low byte.
  defp states(actors, module) do
    for herd <- Grove.Actors.herds_of(actors),
        %{kinds: kinds, wheel: wheel} <- [:sys.get_state(herd)],
        {_id, last, state, _zone} <- Grove.Actors.Herd.Wheel.entries(wheel),
        elem(kinds, Bitwise.band(last, 255)).module == module,
        do: state
  end

  @doc false
  def walks?(%Grove.Actors.Herd{kinds: kinds}, module),
    do: Enum.any?(Tuple.to_list(kinds), &(&1.module == module))
end
