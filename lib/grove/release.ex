defmodule Grove.Release do
  @moduledoc """
  What a release's own commands run (see `rel/env.sh.eex`):

    * `bin/grove migrate` - applies the database migrations and stops,
      without starting the world (`migrate/0`);
    * `bin/grove status` - asks the running node for its status line,
      readiness and players (`status/0`).

  The release's standard commands do the rest: `bin/grove start` (in the
  foreground) or `daemon`, and `bin/grove stop`, a graceful stop that
  drains the players' sessions and writes the last positions first.
  """

  @doc "Applies the store's pending migrations; exits non-zero if they fail."
  @spec migrate() :: :ok
  def migrate do
    for app <- [:crypto, :sqlite3, :p1_pgsql], do: {:ok, _} = Application.ensure_all_started(app)
    load_runtime_config()

    case Application.get_env(:grove, :store) do
      nil ->
        IO.puts("grove: no store configured; nothing to migrate")

      opts ->
        store = Grove.Store.new!(Keyword.put_new(opts, :name, Grove.Store))

        case store.adapter.migrate(store.adapter_config) do
          {:ok, []} ->
            IO.puts("grove: the database is up to date")

          {:ok, applied} ->
            IO.puts("grove: applied migrations #{inspect(applied)}")

          {:error, reason} ->
            IO.puts(:stderr, "grove: migrations failed: #{inspect(reason)}")
            System.halt(1)
        end
    end

    :ok
  end

  # `bin/grove eval` starts no application and reads no runtime
  # configuration; the GROVE_* variables are read by runtime.exs, so read it.
  defp load_runtime_config do
    :ok = Application.load(:grove) |> loaded()

    with root when root != nil <- System.get_env("RELEASE_ROOT"),
         vsn when vsn != nil <- System.get_env("RELEASE_VSN"),
         path = Path.join([root, "releases", vsn, "runtime.exs"]),
         true <- File.exists?(path) do
      runtime = Config.Reader.read!(path, env: :prod, target: :host)
      merged = Config.Reader.merge([grove: Application.get_all_env(:grove)], runtime)
      Application.put_all_env(merged)
    end
  end

  defp loaded(:ok), do: :ok
  defp loaded({:error, {:already_loaded, :grove}}), do: :ok

  @doc "The running node's status: its status line, readiness and sessions."
  @spec status() :: String.t()
  def status do
    {line, _reading} = Grove.Status.line(Grove)

    gateway =
      case Process.whereis(Grove.Gateway) do
        nil ->
          "no gateway"

        _ ->
          checks = Grove.Gateway.Health.checks(Grove.Gateway.config())
          ready = Enum.map_join(checks, ", ", fn {check, result} -> "#{check} #{result}" end)
          "ready: #{ready}; #{Grove.Gateway.stats().sessions} sessions"
      end

    "#{line}\ngrove: #{gateway}"
  end
end
