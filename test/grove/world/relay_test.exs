defmodule Grove.World.RelayTest do
  # The rules by which a node tells its clients that their entities in
  # other nodes' zones were lost (`Grove.World.Relay.judge/4`,
  # `Grove.World.Relay.lost_one?/3`), alone.
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.Relay

  @nodes [:a@h, :b@h, :c@h, :d@h]

  test "an entity a live node holds stands, in an older run of a zone started again too; one nobody holds is lost" do
    owner = self()
    rows = [{1, 3, owner, :b@h}, {2, 3, owner, :b@h}, {3, 3, owner, :b@h}]
    # Zone 3 runs again at epoch 4 on c; b, cut off from c but not from
    # here, still runs its copy at epoch 3 and holds 1 (it may yet hand
    # that copy on at epoch 4, to a node whose name wins the tie); 2
    # crossed into the new run; 3 is held nowhere.
    held = %{1 => {3, 3, :b@h}, 2 => {3, 4, :c@h}}

    assert {[{3, 3, ^owner, :b@h}], standing} =
             Relay.judge(rows, %{3 => 4}, MapSet.new(@nodes), held)

    assert Enum.sort(standing) == [{1, 3, owner, :b@h}, {2, 3, owner, :c@h}]
  end

  test "a copy that stops tells the owner of an entity it was last heard in, and of none that lives on elsewhere" do
    owner = self()
    copy = {1, 3, owner, :b@h}

    # Recorded in this copy: lost with it.
    assert Relay.lost_one?([copy], copy, :a@h)
    # Taken by another node's copy of the zone (a handover), or gone on to another zone.
    refute Relay.lost_one?([{1, 3, owner, :c@h}], copy, :a@h)
    refute Relay.lost_one?([{1, 5, owner, :b@h}], copy, :a@h)
    # No record: its owner was told already, or it left the world.
    refute Relay.lost_one?([], copy, :a@h)
    # A copy on the owner's own node: an entity in a zone there has no record.
    assert Relay.lost_one?([], copy, :b@h)
    refute Relay.lost_one?([{1, 3, owner, :c@h}], copy, :b@h)
  end

  test "an entity held on a node gone is lost, wherever it was last heard; one elsewhere stands" do
    owner = self()
    rows = [{1, 5, owner, :b@h}, {2, 5, owner, :b@h}, {3, 6, owner, :c@h}]
    held = %{2 => {7, 1, :c@h}}

    assert {[{1, 5, ^owner, :b@h}], [{2, 7, ^owner, :c@h}]} =
             Relay.judge(rows, %{}, MapSet.new([:a@h, :c@h]), held)
  end

  test "whatever is recorded, started again, gone and held: each record in question is lost or stands, once, and stands only where a live node holds it" do
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
            %{^id => {zone, _epoch, holder}} ->
              if holder in live,
                do: assert({id, zone, owner, holder} in standing),
                else: assert(row in lost)

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
