defmodule Grove.Application do
  @moduledoc false
  use Application

  @impl true
  def start(_type, _args) do
    env = Application.get_all_env(:grove)

    children =
      if Keyword.get(env, :start, true) do
        [
          # Made into a configuration here, so that the child spec holds
          # its secrets wrapped (see Grove.Secret).
          {Grove, Grove.Config.from_env(env)}
        ]
      else
        []
      end

    Supervisor.start_link(children, strategy: :one_for_one, name: Grove.Application.Supervisor)
  end
end
