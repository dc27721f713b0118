# What a player's move costs to decode, alone: the text the browser, the
# client library, the load and the peers' players write for a move in
# JSON, and the same move in binary, through `Grove.Protocol.decode/3` of
# version 7. Prints the wall and CPU time and the reductions of a decode,
# over three rounds of 200,000 each. Run it in each checkout to compare
# builds:
#
#   cd lab && ELIXIR_ERL_OPTIONS="+S 1:1" taskset -c 1 mix run --no-start bench/move_decode_cost.exs
alias Grove.Protocol

defmodule Bench.MoveDecodeCost do
  # Wall and CPU time (µs) and reductions of `fun` run `n` times, each.
  def each(n, fun) do
    {r0, _} = :erlang.statistics(:exact_reductions)
    t0 = :erlang.monotonic_time(:microsecond)
    {c0, _} = :erlang.statistics(:runtime)
    loop(n, fun)
    {c1, _} = :erlang.statistics(:runtime)
    t1 = :erlang.monotonic_time(:microsecond)
    {r1, _} = :erlang.statistics(:exact_reductions)
    {(t1 - t0) / n, (c1 - c0) * 1000 / n, div(r1 - r0, n)}
  end

  defp loop(0, _fun), do: :ok

  defp loop(n, fun) do
    fun.()
    loop(n - 1, fun)
  end
end

move = %{type: :move, seq: 123_456, dir: :ne}
json = ~s({"type":"move","seq":123456,"dir":"ne"})
binary = IO.iodata_to_binary(Protocol.encode(move, :binary, 7))
{:ok, ^move} = Protocol.decode(json, :json, 7)
{:ok, ^move} = Protocol.decode(binary, :binary, 7)

for {name, frame, encoding} <- [{"json", json, :json}, {"binary", binary, :binary}],
    _round <- 1..3 do
  {wall, cpu, reductions} =
    Bench.MoveDecodeCost.each(200_000, fn -> Protocol.decode(frame, encoding, 7) end)

  IO.puts(
    "a move in #{name}: wall #{Float.round(wall, 3)} us, " <>
      "cpu #{Float.round(cpu, 3)} us, #{reductions} reductions"
  )
end
