defmodule Grove.Cluster.Metrics do
  @moduledoc """
  The cluster's metrics (a `Grove.Metrics.Source`, without an argument):
  the bytes to and from each other node (`Grove.Cluster.traffic/0`).
  """

  @behaviour Grove.Metrics.Source

  @impl true
  def metrics(_argument) do
    [
      {"grove_cluster_bytes_total", :counter,
       "Bytes to and from each other node over distributed Erlang, since its connection came up.",
       for(
         {peer, counts} <- Grove.Cluster.traffic(),
         {direction, bytes} <- counts,
         do: {[peer: peer, direction: direction], bytes}
       )}
    ]
  end

  @impl true
  def reading(_argument), do: nil

  @impl true
  def sample(_argument, _before, _now, _seconds), do: {%{}, %{}}
end
