defmodule Grove.Metrics.Prometheus do
  @moduledoc """
  The Prometheus text exposition format (version 0.0.4) of a Grove
  instance's metrics, as served at `/metrics`.

      # HELP grove_entities Entities in the world.
      # TYPE grove_entities gauge
      grove_entities 20001

  A distributed node adds its name to every sample (`node="grove1@10.0.0.5"`),
  so that one Prometheus can scrape a whole cluster.
  """

  alias Grove.Metrics.Collector

  @doc "All of an instance's metrics as Prometheus text."
  @spec render(atom()) :: iodata()
  def render(instance) do
    node_label = if Node.alive?(), do: [node: node()], else: []
    instance |> Collector.metrics() |> Enum.map(&family(&1, node_label))
  end

  defp family({name, type, help, values}, node_label) do
    [
      "# HELP ",
      name,
      " ",
      help,
      "\n# TYPE ",
      name,
      " ",
      Atom.to_string(type),
      "\n",
      Enum.map(values, fn {labels, value} -> sample(name, type, {labels ++ node_label, value}) end)
    ]
  end

  defp sample(name, :histogram, {labels, %{buckets: buckets, sum: sum, count: count}}) do
    [
      for(
        {le, n} <- buckets,
        do: [name, "_bucket", labels([{:le, number(le)} | labels]), " ", number(n), "\n"]
      ),
      [name, "_bucket", labels([{:le, "+Inf"} | labels]), " ", number(count), "\n"],
      [name, "_sum", labels(labels), " ", number(sum), "\n"],
      [name, "_count", labels(labels), " ", number(count), "\n"]
    ]
  end

  defp sample(name, _type, {labels, value}), do: [name, labels(labels), " ", number(value), "\n"]

  defp labels([]), do: []

  defp labels(labels) do
    [
      "{",
      Enum.map_intersperse(labels, ",", fn {k, v} ->
        [Atom.to_string(k), "=\"", escape(v), "\""]
      end),
      "}"
    ]
  end

  defp escape(value) do
    value
    |> to_string()
    |> String.replace("\\", "\\\\")
    |> String.replace("\"", "\\\"")
    |> String.replace("\n", "\\n")
  end

  defp number(n) when is_integer(n), do: Integer.to_string(n)
  defp number(n) when is_float(n), do: :erlang.float_to_binary(n, [:short])
  defp number(n) when is_binary(n), do: n
  defp number(nil), do: "NaN"
end
