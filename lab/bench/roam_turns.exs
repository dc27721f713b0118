# What a roaming walker's move costs in process turns and messages, by
# kind of process and kind of message: required with `roam_inproc.exs`
# (before it), it traces every process of the VM but itself for
# `ROAM_TURNS_MS` (default 5,000) once the walkers have walked their
# first 20 s, before the measured 30 s, and counts, a move (a move's
# outcome that reached a walker): each kind's turns on the scheduler
# (scheduled in), the messages it took by kind, its collections, its
# reductions (read from each process before and after), and its time on
# the scheduler between in and out (traced: a trace slows every turn by
# about the same, so shares, not speeds); and a zone's turns by the
# message that woke it (the first it took since its last turn, or none:
# a turn to go on with a message already queued, or a collection's).
# Counts, not times: the walkers move at their pace whatever the trace
# costs, and each move is read, answered and written once. Lines start
# with `TURNS`. From the repository's root:
#
#   GROVE_ACTORS=0 GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand \
#     GROVE_ZONE_IDLE_MS=20000 GROVE_PORT=0 ELIXIR_ERL_OPTIONS="+S 1:1 +sbwt none" \
#     taskset -c 0 mix run -r lab/bench/roam_turns.exs lab/bench/roam_inproc.exs 500
Code.require_file("process_kind.exs", __DIR__)

defmodule Bench.RoamTurns do
  @moduledoc false

  @flags [:receive, :running, :garbage_collection, :monotonic_timestamp]

  # A message by its kind: a gen_server's request by its first element,
  # a view message by what it says, a tuple by its tag.
  def message({:"$gen_cast", m}) when is_tuple(m), do: {:cast, elem(m, 0)}
  def message({:"$gen_cast", m}), do: {:cast, m}
  def message({:"$gen_call", _from, m}) when is_tuple(m), do: {:call, elem(m, 0)}
  def message({:"$gen_call", _from, m}), do: {:call, m}
  def message({:grove_view, _zone, what, _seq, _data}), do: {:grove_view, what}
  def message({:grove_view, _zone, what, _seq}), do: {:grove_view, what}
  def message({:grove_view, _zone, what}), do: {:grove_view, what}
  def message({:timeout, _ref, m}) when is_tuple(m), do: {:timer, elem(m, 0)}
  def message({:timeout, _ref, m}), do: {:timer, m}
  def message(m) when is_atom(m), do: m
  def message(m) when is_tuple(m) and is_atom(elem(m, 0)), do: elem(m, 0)
  def message(_other), do: :other

  # A process by its kind: a walker, a zone, a spawned function's (in
  # this world, a zone's ground made at its wake: `Grove.World.Terrain`),
  # else as `process_kind.exs` names it.
  def kind(pid, walkers) do
    cond do
      MapSet.member?(walkers, pid) ->
        :walker

      true ->
        case Grove.Bench.ProcessKind.of(pid) do
          {Grove.World.Zone, :init, 1} -> :zone
          "Elixir.Grove.World.zone.N" -> :zone
          {:erlang, :apply, 2} -> :spawned
          other -> other
        end
    end
  end

  @doc """
  Traces every process but the caller's for `ms` and prints the counts a
  move; `walkers` are the walkers' processes.
  """
  def count(walkers, ms) do
    me = self()
    Process.flag(:priority, :max)
    walkers = MapSet.new(walkers)
    before = Grove.Bench.ProcessKind.reductions()
    :erlang.trace(:processes, true, [{:tracer, me} | @flags])
    :erlang.trace(me, false, [:all])
    until = System.monotonic_time(:millisecond) + ms
    acc = loop(%{kinds: %{}, walkers: walkers, open: %{}, n: %{}}, until)
    :erlang.trace(:processes, false, [:all])
    acc = drain(acc)
    later = Grove.Bench.ProcessKind.reductions()
    Process.flag(:priority, :normal)
    print(acc, before, later)
  end

  defp loop(acc, until) do
    receive do
      message when elem(message, 0) == :trace_ts -> loop(take(acc, message), until)
      _other -> loop(acc, until)
    after
      max(until - System.monotonic_time(:millisecond), 0) -> acc
    end
  end

  defp drain(acc) do
    receive do
      message when elem(message, 0) == :trace_ts -> drain(take(acc, message))
    after
      300 -> acc
    end
  end

  defp bump(acc, key, by \\ 1), do: %{acc | n: Map.update(acc.n, key, by, &(&1 + by))}

  defp kind_of(acc, pid) do
    case acc.kinds do
      %{^pid => kind} ->
        {kind, acc}

      _ ->
        kind = kind(pid, acc.walkers)
        {kind, %{acc | kinds: Map.put(acc.kinds, pid, kind)}}
    end
  end

  defp take(acc, {:trace_ts, pid, tag, info, ts}) do
    {kind, acc} = kind_of(acc, pid)

    case tag do
      :in ->
        acc = bump(acc, {kind, :turns})
        %{acc | open: Map.put(acc.open, pid, {ts, {:none, info}})}

      :out ->
        case Map.pop(acc.open, pid) do
          {{t0, woke}, open} ->
            us = System.convert_time_unit(ts - t0, :native, :nanosecond) / 1000
            acc = bump(%{acc | open: open}, {kind, :us}, us)

            if kind == :zone,
              do: acc |> bump({:zone_turn, woke}) |> bump({:zone_us, woke}, us),
              else: acc

          {nil, _} ->
            acc
        end

      # A message is taken into a process's queue in its own turn: the
      # first in a turn names what the turn was for.
      :receive ->
        what = message(info)
        acc = bump(acc, {kind, :msg, what})

        case acc.open do
          %{^pid => {t0, {:none, _}}} -> %{acc | open: Map.put(acc.open, pid, {t0, what})}
          _ -> acc
        end

      gc when gc in [:gc_minor_start, :gc_major_start] ->
        bump(acc, {kind, :gc})

      _ ->
        acc
    end
  end

  defp take(acc, _other), do: acc

  defp print(acc, before, later) do
    n = acc.n
    moves = Map.get(n, {:walker, :msg, :grove_move}, 0)
    per = fn x -> Float.round(x / max(moves, 1), 3) end

    reductions =
      Enum.reduce(later, %{}, fn {pid, r}, by ->
        case acc.kinds do
          %{^pid => kind} ->
            Map.update(by, kind, r - Map.get(before, pid, 0), &(&1 + r - Map.get(before, pid, 0)))

          _ ->
            by
        end
      end)

    kinds =
      n
      |> Map.keys()
      |> Enum.flat_map(fn
        {kind, :turns} -> [kind]
        _ -> []
      end)
      |> Enum.sort_by(&(-Map.get(n, {&1, :turns})))

    IO.puts("TURNS moves (outcomes that reached a walker): #{moves}")

    turns = Enum.sum(for k <- kinds, do: Map.get(n, {k, :turns}, 0))
    msgs = Enum.sum(for {{_k, :msg, _}, c} <- n, do: c)
    us = Enum.sum(for k <- kinds, do: Map.get(n, {k, :us}, 0))

    IO.puts(
      "TURNS all: #{per.(turns)} turns, #{per.(msgs)} messages a move, #{round(us / max(moves, 1))} us traced"
    )

    for kind <- kinds do
      IO.puts(
        "TURNS #{inspect(kind)}: #{per.(Map.get(n, {kind, :turns}))} turns, " <>
          "#{per.(Map.get(n, {kind, :gc}, 0))} collections, " <>
          "#{round(Map.get(reductions, kind, 0) / max(moves, 1))} reductions, " <>
          "#{round(Map.get(n, {kind, :us}, 0) / max(moves, 1))} us traced a move"
      )

      for {{^kind, :msg, what}, c} <- Enum.sort_by(n, fn {_, c} -> -c end),
          do: IO.puts("TURNS #{inspect(kind)} took #{inspect(what)}: #{per.(c)} a move")
    end

    for {{:zone_turn, woke}, c} <- Enum.sort_by(n, fn {_, c} -> -c end) do
      zus = Map.get(n, {:zone_us, woke}, 0)

      IO.puts(
        "TURNS a zone's turn woken by #{inspect(woke)}: #{per.(c)} a move, " <>
          "#{round(zus / max(c, 1))} us traced each"
      )
    end
  end
end
