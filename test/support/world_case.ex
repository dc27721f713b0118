defmodule Grove.WorldCase do
  @moduledoc """
  Shared setup for tests that need a running world: a private world per test,
  small, with manual ticks so tests drive time by message.

      use Grove.WorldCase, async: true

      @tag world: [width: 40, height: 40, zone_size: 10]
      test "...", %{world: world} do ...
  """

  use ExUnit.CaseTemplate

  using do
    quote do
      import Grove.WorldCase
    end
  end

  setup context do
    opts = options(Map.get(context, :world, []))
    start_supervised!({Grove.World, opts})
    %{world: opts[:name]}
  end

  @doc """
  Runs `fun` with the name of a world of its own, started with `opts` over
  this case's defaults, and stops the world after, whatever `fun` does:
  for a property that runs each of its cases in a new world. Returns what
  `fun` returns.
  """
  def with_world(opts, fun) do
    opts = options(opts)
    {:ok, sup} = Grove.World.start_link(opts)

    try do
      fun.(opts[:name])
    after
      Supervisor.stop(sup)
    end
  end

  defp options(opts) do
    Keyword.merge(
      [
        name: :"world_#{System.unique_integer([:positive])}",
        width: 40,
        height: 40,
        zone_size: 10,
        tick: :manual,
        # Meadow only unless a test asks for terrain, so placements are predictable.
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
        rules: [move_rate: nil]
      ],
      opts
    )
  end

  @doc "Waits for the outcome of one move and returns it."
  defmacro assert_outcome(id, tag, timeout \\ 1000) do
    quote do
      id = unquote(id)
      tag = unquote(tag)
      assert_receive {:grove_move, ^id, ^tag, outcome}, unquote(timeout)
      outcome
    end
  end

  @doc "Asks for one action of the world's game and waits for its outcome, which it returns."
  def act(world, id, action, target, args \\ %{}) do
    tag = make_ref()
    :ok = Grove.World.act(world, id, action, target, args, tag)
    assert_receive {:grove_act, ^id, ^tag, outcome}, 5000
    outcome
  end

  @doc "Finds a cell with the given terrain kind, scanning row by row."
  def find_cell(world, kind, from \\ {0, 0}) do
    terrain = Grove.World.terrain(world)
    {fx, fy} = from

    Enum.find_value(fy..(terrain.height - 1), fn y ->
      Enum.find_value(fx..(terrain.width - 1), fn x ->
        if Grove.World.Terrain.at(terrain, x, y) == kind, do: {x, y}
      end)
    end)
  end

  @doc """
  Retries `check` (which asserts) until it passes or at least ten seconds
  have gone: for effects another process applies on its own time, such as a
  zone handling a monitor's DOWN. Waits between tries with `receive ...
  after`. A check that passes returns at once, so the bound is generous: on
  a busy machine a second is not long.
  """
  def eventually(check, tries \\ 1000) do
    check.()
  rescue
    error in [ExUnit.AssertionError, MatchError] ->
      if tries > 1 do
        receive do
        after
          10 -> eventually(check, tries - 1)
        end
      else
        reraise error, __STACKTRACE__
      end
  end

  @doc """
  Kills zone `index` of `world` and waits until the world has started it
  again: for tests of what a zone's restart keeps.
  """
  def kill_zone(world, index) do
    zone = Grove.World.zone_pid(world, index)
    ref = Process.monitor(zone)
    Process.exit(zone, :kill)
    assert_receive {:DOWN, ^ref, :process, ^zone, :killed}

    eventually(fn ->
      assert is_pid(Grove.World.zone_pid(world, index)) and
               Grove.World.zone_pid(world, index) != zone
    end)

    :ok
  end

  @doc """
  A process that joins the world on request and then just waits, so tests
  can kill it. Not linked (a test kills it to see its player leave), so it
  is killed when the test exits, whether the test passed or not.
  """
  def spawn_client(world, opts \\ []) do
    test = self()

    pid =
      spawn(fn ->
        send(test, {:joined, self(), Grove.World.join(world, opts)})

        receive do
          :never -> :ok
        end
      end)

    ExUnit.Callbacks.on_exit(fn -> Process.exit(pid, :kill) end)

    # A join waits for its zone: on a busy machine, longer than assert_receive's default.
    assert_receive {:joined, ^pid, {:ok, id, cell}}, 5000
    {pid, id, cell}
  end
end
