defmodule Grove.Gateway.Setup do
  @moduledoc false
  # Gives Yaws its configuration once its processes run, and says where to look.
  use GenServer

  require Logger

  def start_link(arg), do: GenServer.start_link(__MODULE__, arg)

  @impl true
  def init({gconf, sconfs, _config}) do
    case :yaws_api.setconf(gconf, sconfs) do
      :ok ->
        Logger.info("grove: listening on #{Grove.Gateway.url()}")
        {:ok, :configured}

      other ->
        {:stop, {:yaws_setconf_failed, other}}
    end
  end
end
