defmodule Grove.World.Zone.SubscriptionsTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.Zone.Subscriptions

  # A pid of another node, as that node would hand it over.
  defp remote(n) do
    name = Atom.to_string(:"other#{n}@host")
    :erlang.binary_to_term(<<131, 88, 119, byte_size(name), name::binary, 0::96>>)
  end

  test "formats and nodes are counted while anyone reads or watches from them" do
    remote = remote(2)
    subs = Subscriptions.new(node())
    {subs, :new} = Subscriptions.subscribe(subs, {self(), :json}, 1, :r1)
    {subs, {:new, :other2@host}} = Subscriptions.subscribe(subs, {remote, :binary}, 2, :r2)
    assert Enum.sort(Subscriptions.formats(subs)) == [:binary, :json]
    assert Subscriptions.nodes(subs) == [:other2@host]

    assert Subscriptions.down(subs, {remote, :binary}) |> Subscriptions.nodes() == []
    assert {_, :none} = Subscriptions.unsubscribe(subs, {self(), :binary}, 1)
    subs = Subscriptions.monitored(subs, {self(), :json}, :r3)
    assert {_, {:last, :r3}} = Subscriptions.unsubscribe(subs, {self(), :json}, 1)
  end

  test "whatever subscribes and unsubscribes, the counts are the viewers', and the zone is watched while one watches" do
    remotes = for n <- 1..2, do: remote(n)
    pids = [self() | remotes]

    check(
      forall(:proper_types.list(command()), fn commands ->
        {subs, model} =
          Enum.reduce(commands, {Subscriptions.new(node()), MapSet.new()}, fn
            {:subscribe, p, format, id}, {subs, model} ->
              viewer = {Enum.at(pids, p), format}
              {subs, _} = Subscriptions.subscribe(subs, viewer, id, make_ref())
              {subs, MapSet.put(model, {viewer, id})}

            {:unsubscribe, p, format, id}, {subs, model} ->
              viewer = {Enum.at(pids, p), format}
              {subs, result} = Subscriptions.unsubscribe(subs, viewer, id)
              model2 = MapSet.delete(model, {viewer, id})
              still = Enum.any?(model2, &match?({^viewer, _}, &1))

              case result do
                :none -> refute MapSet.member?(model, {viewer, id})
                :kept -> assert still
                {:last, _ref} -> refute still
              end

              {subs, model2}

            {:down, p, format}, {subs, model} ->
              viewer = {Enum.at(pids, p), format}
              {Subscriptions.down(subs, viewer), MapSet.reject(model, &match?({^viewer, _}, &1))}
          end)

        viewers = model |> Enum.map(&elem(&1, 0)) |> Enum.uniq()
        assert Subscriptions.watched?(subs) == (viewers != [])

        assert Enum.sort(Subscriptions.formats(subs)) ==
                 viewers |> Enum.map(&elem(&1, 1)) |> Enum.uniq() |> Enum.sort()

        assert Enum.sort(Subscriptions.nodes(subs)) ==
                 viewers
                 |> Enum.map(&node(elem(&1, 0)))
                 |> Enum.reject(&(&1 == node()))
                 |> Enum.uniq()
                 |> Enum.sort()

        for viewer <- viewers, do: assert(Subscriptions.member?(subs, viewer))
      end),
      numtests: 300
    )
  end

  defp command do
    p = :proper_types.integer(0, 2)
    format = :proper_types.elements([:json, :binary])
    id = :proper_types.integer(1, 3)

    :proper_types.frequency([
      {3, {:subscribe, p, format, id}},
      {2, {:unsubscribe, p, format, id}},
      {1, {:down, p, format}}
    ])
  end
end
