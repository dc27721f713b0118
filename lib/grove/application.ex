defmodule Grove.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args) do
    env = Application.get_all_env(:grove)

    children =
      if Keyword.get(env, :start, true) do
        # Made into a configuration here, so that the child spec holds
        # its secrets wrapped (see Grove.Secret).
        config = Grove.Config.from_env(env)
        :ok = check_port(config)
        [{Grove, config}]
      else
        []
      end

    Supervisor.start_link(children, strategy: :one_for_one, name: Grove.Application.Supervisor)
  end

  # Before anything starts (the store, the world): a port another program
  # holds ends the start at once, with one line and a non-zero status, as
  # any command that cannot do its job. Failing the application instead
  # would stop the VM with a crash report and a crash dump, for a
  # mistake in a setting.
  defp check_port(%Grove.Config{gateway: false}), do: :ok

  defp check_port(%Grove.Config{gateway: gateway}) do
    case Grove.Gateway.check_port(gateway) do
      :ok ->
        :ok

      {:error, _reason, line} ->
        IO.puts(:stderr, "grove: " <> line)
        System.halt(1)
    end
  end
end
