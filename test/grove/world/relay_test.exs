defmodule Grove.World.RelayTest do
  # The rule by which a node tells its clients that their entities in
  # other nodes' zones were lost (`Grove.World.Relay.judge/4`), alone.
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.Relay

  @nodes [:a@h, :b@h, :c@h, :d@h]

  test "an entity still held in an older run of a zone started again is lost; in the new run it stands" do
    owner = self()
    rows = [{1, 3, owner, :b@h}, {2, 3, owner, :b@h}]
    # Zone 3 runs again at epoch 4 on c; b, cut off from c but not from
    # here, still runs its copy at epoch 3 and holds 1; 2 crossed into the new run.
    held = %{1 => {3, 3, :b@h}, 2 => {3, 4, :c@h}}

    assert {[{1, 3, ^owner, :b@h}], [{2, 3, ^owner, :c@h}]} =
             Relay.judge(rows, %{3 => 4}, MapSet.new(@nodes), held)
  end

  test "an entity held on a node gone is lost, wherever it was last heard; one elsewhere stands" do
    owner = self()
    rows = [{1, 5, owner, :b@h}, {2, 5, owner, :b@h}, {3, 6, owner, :c@h}]
    held = %{2 => {7, 1, :c@h}}

    assert {[{1, 5, ^owner, :b@h}], [{2, 7, ^owner, :c@h}]} =
             Relay.judge(rows, %{}, MapSet.new([:a@h, :c@h]), held)
  end

  test "whatever is recorded, started again, gone and held: each record in question is lost or stands, once, and stands only where a zone that runs holds it" do
    check(
      forall(case_(), fn {records, runs, live, held} ->
        rows =
          for {{zone, holder}, id} <- Enum.with_index(records), do: {id, zone, self(), holder}

        {runs, live, held} = {Map.new(runs), MapSet.new(live), Map.new(held)}
        {lost, standing} = Relay.judge(rows, runs, live, held)

        questioned =
          for {_id, zone, _owner, holder} = row <- rows,
              is_map_key(runs, zone) or holder not in live,
              do: row

        ids = fn rows -> rows |> Enum.map(&elem(&1, 0)) |> Enum.sort() end
        assert ids.(lost ++ standing) == ids.(questioned)

        for {id, _zone, owner, _holder} = row <- questioned do
          case held do
            %{^id => {zone, epoch, holder}} when epoch >= :erlang.map_get(zone, runs) ->
              assert {id, zone, owner, holder} in standing

            %{^id => {zone, _epoch, holder}} when not is_map_key(runs, zone) ->
              assert {id, zone, owner, holder} in standing

            _ ->
              assert row in lost
          end
        end

        true
      end),
      numtests: 300
    )
  end

  defp case_ do
    node = :proper_types.oneof(@nodes)
    zone = :proper_types.integer(0, 5)
    epoch = :proper_types.integer(1, 6)
    id = :proper_types.integer(0, 30)

    {:proper_types.list({zone, node}), :proper_types.list({zone, epoch}),
     :proper_types.list(node), :proper_types.list({id, {zone, epoch, node}})}
  end
end
