defmodule Grove.Ports do
  @moduledoc false
  # Ports for servers the tests, the load lab and the benches start. It lives
  # in test/support/net, and the lab (lab/mix.exs) compiles it from there too.

  @doc "A loopback TCP port nobody listens on now, as the OS picks it."
  @spec free() :: :inet.port_number()
  def free do
    {:ok, socket} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(socket)
    :ok = :gen_tcp.close(socket)
    port
  end
end
