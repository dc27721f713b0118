defmodule Grove.Gateway.Scratch do
  @moduledoc false
  # A folder of the gateway's own for what Yaws writes when it starts (the
  # modules it generates and compiles, in `$YAWSHOME/.yaws/yaws/ID`, which
  # must exist, or Yaws writes them into /tmp itself; its log folder):
  # made afresh, for this user alone, and removed when the gateway stops.
  # Instances on one machine share no writable folder.
  use GenServer

  @doc """
  Makes a new folder, unique to this gateway, for the Yaws server `id`,
  and points `$YAWSHOME` at it: before Yaws is configured, which writes
  there already. Returns its path, for `start_link/1`.
  """
  @spec make!(charlist()) :: Path.t()
  def make!(id) do
    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-yaws-#{System.pid()}-#{System.unique_integer([:positive])}-" <>
          Base.url_encode64(:crypto.strong_rand_bytes(6))
      )

    :ok = File.mkdir(dir)
    File.chmod!(dir, 0o700)
    File.mkdir_p!(Path.join([dir, ".yaws", "yaws", to_string(id)]))
    System.put_env("YAWSHOME", dir)
    dir
  end

  @doc "Owns the folder `make!/1` made: it is removed when the gateway stops."
  @spec start_link(Path.t()) :: GenServer.on_start()
  def start_link(dir), do: GenServer.start_link(__MODULE__, dir)

  @impl true
  def init(dir) do
    # So that terminate/2 runs when the gateway stops.
    Process.flag(:trap_exit, true)
    {:ok, dir}
  end

  @impl true
  def terminate(_reason, dir) do
    File.rm_rf(dir)
    :ok
  end
end
