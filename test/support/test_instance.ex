defmodule Grove.TestInstance do
  @moduledoc """
  Starts a whole Grove instance (world, gateway on a free port, and with
  `sqlite: true` a store in a file of its own) for the tests that need one,
  and stops it, deleting its files, when the test or the module is done.
  Yaws runs one server per node, so such tests are not async.

      setup_all do
        Grove.TestInstance.start!("api", sqlite: true, accounts: [guests: false])
      end

  Returns `%{sup: pid, instance: name, world: world_name, port: port, dir: dir}`.
  """

  import ExUnit.Callbacks, only: [on_exit: 1]

  def start!(prefix, opts \\ []) do
    name = :"#{prefix}_test_#{System.unique_integer([:positive])}"

    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-#{prefix}-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    {sqlite, opts} = Keyword.pop(opts, :sqlite, false)
    store = if sqlite, do: [store: [adapter: :sqlite, path: Path.join(dir, "grove.db")]], else: []

    # A test stops at once: nothing polls its readiness (a test of the
    # moment a stop answers 503 first asks for it).
    opts =
      case Keyword.get(opts, :gateway, port: 0) do
        false -> opts
        gateway -> Keyword.put(opts, :gateway, Keyword.put_new(gateway, :unready_ms, 0))
      end

    {:ok, sup} =
      [name: name, gateway: [port: 0], status_interval: false]
      |> Keyword.merge(store)
      |> Keyword.merge(opts)
      |> Grove.start_link()

    Process.unlink(sup)

    on_exit(fn ->
      if Process.alive?(sup), do: Supervisor.stop(sup, :normal, 10_000)
      File.rm_rf(dir)
    end)

    %{sup: sup, instance: name, world: Grove.world(name), port: Grove.Gateway.port(), dir: dir}
  end
end
