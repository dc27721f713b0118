defmodule Grove.World.Placer.State do
  @moduledoc false
  # Where every zone of a world runs, as one node's placer sees it, and the
  # rules by which that changes, as plain functions: a placement read or
  # started, the members that change, a zone announced by another node, a
  # handover that ends, a zone taken over, a node lost or paused. Each
  # returns the new state and the effects `Grove.World.Placer` carries
  # out, in order, as `Grove.World.Zone.Handoff` does for a zone:
  #
  #   * `{:start_zone, index}`, `{:stop_zone, index}` - the zone's process
  #     here; `{:forget, index}` empties its table (a stale copy that stops),
  #     and its entities' owners are told they are lost, unless their nodes
  #     heard they live on in another copy (`Grove.World.Relay.lost_one/4`);
  #   * `{:hand_over, index, to, epoch}` - a handover to `to`, in a process
  #     of its own;
  #   * `{:retire, index, timer}` - a zone handed away passes on what comes
  #     late for a while: the timer after which it stops, numbered, its
  #     number in the message it sends (`retired/3`);
  #     `{:cancel_retire, index}` - that timer, cancelled;
  #   * `{:take_rows, index, rows, subscriptions, seq}` - a zone handed to
  #     this node: its rows (its entities' and its game's layer, as the
  #     zone gave them: not read here), subscriptions and view number,
  #     written here;
  #   * `{:handed_to, index, node}`, `{:keep, index}` - to the zone that was
  #     being handed over: it was taken, or it stays;
  #   * `{:publish, locations}` and `{:locate, index, node, epoch}` - the
  #     whole placement, or one zone's, for `Grove.World.zone_address/2`;
  #   * `{:reset_feed, index}` - the zone's view numbers, past the lost run's;
  #   * `{:fetch_life, indexes}` - zones about to start again after their
  #     node was lost: the rows of their bacteria, asked of every member
  #     (the heir they were sent to may be another node than their owner
  #     now, if the members changed since), newest kept;
  #   * `{:wake_saved, index}` - a zone on demand started again after its
  #     node was lost: woken now if it slept there with a save in the
  #     store, before any node hears that it runs (and tells the owners of
  #     what it held that they are lost);
  #   * `{:recovered, indexes}` - zones that run again, empty: this node's
  #     clients and viewers in them are told;
  #   * `{:send, node, message}` - to that node's placer (`{:zone_at, ...}`,
  #     or `{:zones_at, [{index, node, epoch, how}]}` for many zones at
  #     once (`batch/1`), `{:joined, node}`, `{:abandoned, ...}`);
  #     `{:send_self, message}` and `{:send_after, message, ms}` - to this one;
  #   * `{:pause}` - the world stops here until a quorum is back;
  #   * `{:count, key, n}` - the world's counter `key` (`Grove.World.Stats`), by `n`;
  #   * `{:log, level, text}`.
  #
  # Every placement of a zone has an epoch, one more than the one before; of
  # two placements, the newer is the one of the higher epoch, and at one
  # epoch the one whose node comes first by name (`newer?/2`), on every
  # node, whatever order they are heard in.
  #
  # Which nodes are connected is read by the process and passed in
  # (`connected`), as `Zone.Handoff` is given the directory.

  alias Grove.Cluster.Placement

  # How often a node waiting for the first member to start the world asks again.
  @place_retry 100
  # A handover that failed is tried again this much later, if still due.
  @settle_retry 1000
  # Zones announced to one node in one message at most.
  @batch 1000
  # Placements kept aside (`located`) before the placement's tuple is
  # built again with them: this many at least, or an eighth of the zones.
  @flush_least 8

  defstruct [
    :node,
    :zone_count,
    # nil until placed; then a tuple, by zone, of `{node, epoch}`, as it
    # stood when it was last built: what rules placed since is in
    # `located`, read first, and written into the tuple once it holds an
    # eighth of the zones (`flush/1`), since a tuple is copied whole on
    # every write, and the zones of a world of 100,000 are announced a
    # thousand a message, each heard in a rule of its own: a tuple built
    # again by each would cost a copy of every zone per thousand placed.
    # Every zone's placement, the two together: `placements/1`.
    locations: nil,
    located: %{},
    members: [],
    # Nodes that said they leave: no member, until the group drops them.
    leaving: MapSet.new(),
    # Zones being handed over: index => {to, epoch}.
    handing: %{},
    # Zones handed away (or being), which still pass on what comes late.
    retiring: MapSet.new(),
    # Zones handed away whose stop is set: index => the number of its
    # timer (`{:retire, index, timer}`); and the timers numbered so far.
    retire_timers: %{},
    timers_set: 0,
    # Zones whose process runs here, retiring ones included.
    running: MapSet.new(),
    # Announcements heard while paused or not placed yet: index => {node, epoch, how}.
    early: %{},
    # Nodes this one has seen, as members or connected (or that another
    # said it lost): only one of these can be gone.
    seen: MapSet.new(),
    paused: false,
    # Zones announced to one node in one message at most (`batch/1`).
    batch: @batch
  ]

  @type index :: non_neg_integer()
  @type epoch :: non_neg_integer()
  @type placement :: {node(), epoch()}
  @type how :: :started | :handed | :restarted

  @type effect ::
          {:start_zone, index()}
          | {:stop_zone, index()}
          | {:forget, index()}
          | {:hand_over, index(), node(), epoch()}
          | {:retire, index(), non_neg_integer()}
          | {:cancel_retire, index()}
          | {:take_rows, index(), term(), list(), non_neg_integer()}
          | {:handed_to, index(), node()}
          | {:keep, index()}
          | {:publish, [placement()]}
          | {:locate, index(), node(), epoch()}
          | {:reset_feed, index()}
          | {:wake_saved, index()}
          | {:recovered, [index()]}
          | {:send, node(), tuple()}
          | {:send_self, tuple()}
          | {:send_after, term(), pos_integer()}
          | {:pause}
          | {:count, atom(), pos_integer()}
          | {:log, Logger.level(), String.t()}

  @type t :: %__MODULE__{
          node: node(),
          zone_count: pos_integer(),
          locations: tuple() | nil,
          located: %{index() => placement()},
          members: [node()],
          leaving: MapSet.t(node()),
          handing: %{index() => {node(), epoch()}},
          retiring: MapSet.t(index()),
          retire_timers: %{index() => non_neg_integer()},
          timers_set: non_neg_integer(),
          running: MapSet.t(index()),
          early: %{index() => {node(), epoch(), how()}},
          seen: MapSet.t(node()),
          paused: boolean(),
          batch: pos_integer()
        }

  @type result :: {t(), [effect()]}

  @doc "A placer of `zone_count` zones on `node`, not placed yet, its zones in `running`."
  @spec new(node(), pos_integer(), Enumerable.t()) :: t()
  def new(node, zone_count, running \\ []),
    do: %__MODULE__{node: node, zone_count: zone_count, running: MapSet.new(running)}

  @doc """
  True when placement `a` is newer than `b`: a higher epoch, or at one
  epoch a node that comes first by name.

      iex> Grove.World.Placer.State.newer?({:b@h, 3}, {:a@h, 2})
      true
      iex> Grove.World.Placer.State.newer?({:a@h, 2}, {:b@h, 2})
      true
      iex> Grove.World.Placer.State.newer?({:b@h, 2}, {:a@h, 2})
      false
      iex> Grove.World.Placer.State.newer?({:a@h, 2}, {:a@h, 2})
      false
  """
  @spec newer?(placement(), placement()) :: boolean()
  def newer?({node_a, epoch_a}, {node_b, epoch_b}),
    do: epoch_a > epoch_b or (epoch_a == epoch_b and node_a < node_b)

  @doc "Where the zone runs, with the epoch of that placement (`{nil, 0}` before any)."
  @spec placement(t(), index()) :: placement()
  def placement(%__MODULE__{locations: nil}, _index), do: {nil, 0}

  def placement(%__MODULE__{located: located} = state, index) do
    case located do
      %{^index => placement} -> placement
      _none -> elem(state.locations, index)
    end
  end

  @doc "Every zone's placement, by zone (nil before any)."
  @spec placements(t()) :: tuple() | nil
  def placements(state), do: build(state).locations

  @doc "The epoch of the zone's placement (0 before any)."
  @spec epoch(t(), index()) :: epoch()
  def epoch(state, index), do: state |> placement(index) |> elem(1)

  @doc "The node the zone runs on (nil before any placement)."
  @spec location(t(), index()) :: node() | nil
  def location(state, index), do: state |> placement(index) |> elem(0)

  ## Placing

  @doc """
  The first placement, or a placement again after a pause: with `running`,
  the placement a member that runs the world gave (`nil` when none does),
  this node joins it; else the first of the members by name starts the
  world over the members, and the others ask again a little later.
  Nodes that start together would each start a world of their own,
  placed over the members each saw, and never agree.
  """
  @spec join_or_start(t(), [placement()] | nil) :: result()
  def join_or_start(state, running) when is_list(running),
    do: state |> join_running(running) |> batch()

  def join_or_start(state, nil) do
    if Enum.min(state.members) != state.node do
      {state, [{:send_after, :place, @place_retry}]}
    else
      owners = Placement.owners(state.zone_count, state.members)
      {state, published} = publish(state, for(node <- Tuple.to_list(owners), do: {node, 1}))

      # Effects gathered last first, each zone's in a list of its own, and
      # put in order once: a list appended to is copied whole each time.
      {state, started} =
        for index <- 0..(state.zone_count - 1),
            elem(owners, index) == state.node,
            reduce: {state, []} do
          {state, started} ->
            {state, start} = start_zone(state, index)
            {state, [announce(state, index, :started), start | started]}
        end

      batch({state, published ++ Enum.concat(Enum.reverse(started, [say_joined(state)]))})
    end
  end

  # The others hand this node its share when they see it; what they
  # already place here (they saw this node before it saw them), it starts
  # now. Their locations follow the members they saw when they placed the
  # zones; this node may see more already (nodes that started with it),
  # and no change of members will come to tell it: what it now runs for
  # another, it hands over at once. Only that: a node it does not count
  # among its members yet may well be up (the others see it), so its zones
  # are not started again here.
  #
  # What it starts it announces, and it tells the others it joined: the
  # placement it read may be older than what another knows (a placer
  # started again here read it while another started this node's zones
  # again, as the old placer asked), and a node that answers with the
  # newer placement stops the copy here (`announced/6`); and another that
  # still counts this node as leaving counts it again (`joined/3`).
  defp join_running(state, locations) do
    {state, published} = publish(state, locations)

    {state, started} =
      Enum.reduce(Enum.with_index(locations), {state, []}, fn
        {{at, _epoch}, index}, {state, started} when at == state.node ->
          {state, start} = start_zone(state, index)
          {state, [announce(state, index, :handed), start | started]}

        _other, acc ->
          acc
      end)

    {state, handed} =
      Enum.reduce(0..(state.zone_count - 1), {state, []}, fn index, {state, handed} ->
        owner = Placement.owner(index, state.members)

        if location(state, index) == state.node and owner != state.node do
          {state, more} = hand_over(state, index, owner)
          {state, [more | handed]}
        else
          {state, handed}
        end
      end)

    {state,
     published ++
       Enum.concat(Enum.reverse(started, [say_joined(state) | Enum.reverse(handed)]))}
  end

  # A new placement is built whole before it is published: another node
  # that read it half built would take the zones not yet written for this
  # node's, at epoch 0, and keep them. What was heard early is heard again
  # once it is.
  defp publish(state, locations) do
    replays =
      for {index, {node, epoch, how}} <- state.early,
          do: {:send_self, {:zone_at, index, node, epoch, how}}

    {%{state | locations: List.to_tuple(locations), located: %{}, early: %{}}
     |> see(state.members), [{:publish, locations} | replays]}
  end

  # A placer started again while its node stayed up may be counted as
  # leaving still by others that never saw the group drop its node; and
  # the placement it read may be older than what others announced to it
  # before it ran, or before it paused: each answers with what it serves
  # (`joined/3`).
  defp say_joined(state) do
    for member <- state.members, member != state.node, do: {:send, member, {:joined, state.node}}
  end

  ## Members

  @doc """
  The members changed (`members`, as the group lists them), and this
  node's side has a quorum or not: it pauses without one, resumes (to be
  placed again, `join_or_start/2`) with one, and otherwise hands over what
  is no longer its own and starts again what a lost node ran. Returns
  `:resume` as the first effect when it must be placed again.
  """
  @spec members(t(), [node()], boolean(), [node()]) :: result()
  def members(state, members, quorum?, connected) do
    # A node that said it leaves is no member, even while the group still
    # lists it; once the group no longer does, it may come back.
    leaving = MapSet.filter(state.leaving, &(&1 in members))
    before = state.members

    state =
      %{state | members: members -- MapSet.to_list(leaving), leaving: leaving}
      |> see(members ++ connected)

    case {quorum?, state.paused} do
      {false, false} ->
        pause(state)

      {false, true} ->
        {state, []}

      {true, true} ->
        {%{state | paused: false, locations: nil, located: %{}},
         [{:log, :warning, "world: resumed; this node takes its share from the others"}]}

      {true, false} ->
        {state, effects} = rebalance(state, connected)
        newcomers = state.members -- before

        {state, effects ++ introduce(state, newcomers) ++ ask(state, newcomers)}
        |> batch()
        |> flush()
    end
  end

  # A member new here may have told this node what it serves before this
  # node's placer ran, or while it was paused (it saw this node first):
  # this node says it joined, and hears it again (`joined/3`).
  defp ask(%__MODULE__{locations: nil}, _newcomers), do: []

  defp ask(state, newcomers),
    do: for(newcomer <- newcomers, do: {:send, newcomer, {:joined, state.node}})

  @doc """
  A node said it leaves, before it hands its zones over and stops: nothing
  is to be handed to it any more. One the group has dropped already is no
  member; remembering it would keep it out when it comes back.
  """
  @spec leaving(t(), node()) :: t()
  def leaving(state, node) do
    if node in state.members,
      do: %{state | leaving: MapSet.put(state.leaving, node), members: state.members -- [node]},
      else: state
  end

  @doc """
  A node's placer joined the placement: it hears of every zone this node
  serves. What this node announced may never have reached it: sent
  before its placer ran (its node is a member from the moment its
  membership runs, before its world), or heard before it paused and
  started over from a placement read from a member that had not heard
  of it yet; nothing else would tell it again.

  Or started again while its node stayed up (its supervisor restarted
  it): the old one said it leaves, and the group may never have shown
  this node the node gone (its old process and its new one changed
  places before this node's membership looked), so that nothing else
  would ever make it a member again here. It is one again, and gets its
  share.
  """
  @spec joined(t(), node(), [node()]) :: result()
  def joined(state, node, connected) do
    if node in state.leaving do
      state =
        %{
          state
          | leaving: MapSet.delete(state.leaving, node),
            members: Enum.sort([node | state.members])
        }
        |> see([node])

      if state.paused do
        {state, []}
      else
        {state, effects} = rebalance(state, connected)
        {state, effects ++ introduce(state, [node])} |> batch() |> flush()
      end
    else
      batch({state, introduce(state, [node])})
    end
  end

  @doc "A node went down: what was waiting for it to be gone settles."
  @spec nodedown(t(), [node()]) :: result()
  def nodedown(%__MODULE__{paused: true} = state, _connected), do: {state, []}

  def nodedown(state, connected),
    do: state |> see(connected) |> rebalance(connected) |> batch() |> flush()

  @doc "A node came up: seen, so that it can be gone once it is not."
  @spec nodeup(t(), node()) :: t()
  def nodeup(state, node), do: see(state, [node])

  # Members changed: hand over what is no longer this node's, and start
  # again what was on a node that is gone and is now this node's.
  defp rebalance(%__MODULE__{locations: nil} = state, _connected), do: {state, []}

  defp rebalance(state, connected) do
    {state, effects, restarted} =
      Enum.reduce(0..(state.zone_count - 1), {state, [], []}, fn index,
                                                                 {state, effects, restarted} ->
        case settle_zone(state, index, connected) do
          {state, more, :restarted} -> {state, [more | effects], [index | restarted]}
          {state, [], _} -> {state, effects, restarted}
          {state, more, _} -> {state, [more | effects], restarted}
        end
      end)

    effects = effects |> Enum.reverse() |> Enum.concat()

    if restarted == [] do
      {state, effects}
    else
      restarted = Enum.reverse(restarted)
      # The rows of all the zones started again, asked of the members at once.
      {_each, effects} = Enum.split_with(effects, &match?({:fetch_life, _}, &1))

      {state,
       [{:fetch_life, restarted} | effects] ++
         [
           {:log, :warning,
            "zones #{inspect(restarted, charlists: :as_lists)}: their node is gone; started again here, empty"},
           {:recovered, restarted}
         ]}
    end
  end

  @doc "A zone whose handover failed a while ago: handed over now if still due."
  @spec settle(t(), index(), [node()]) :: result()
  def settle(%__MODULE__{paused: true} = state, _index, _connected), do: {state, []}

  def settle(state, index, connected) do
    {state, effects, _} = settle_zone(state, index, connected)
    flush({state, effects})
  end

  @doc """
  Zones whose handovers failed together a while ago, each settled as
  `settle/3` settles one, in order, the placement written once.
  """
  @spec settle_all(t(), [index()], [node()]) :: result()
  def settle_all(%__MODULE__{paused: true} = state, _indexes, _connected), do: {state, []}

  def settle_all(state, indexes, connected) do
    {state, effects} =
      Enum.reduce(indexes, {state, []}, fn index, {state, effects} ->
        {state, more, _} = settle_zone(state, index, connected)
        {state, [more | effects]}
      end)

    flush({state, effects |> Enum.reverse() |> Enum.concat()})
  end

  # One zone: handed over if it runs here and belongs elsewhere, started
  # again if it ran on a node that is down and belongs here now.
  defp settle_zone(%__MODULE__{locations: nil} = state, _index, _connected), do: {state, [], nil}

  defp settle_zone(state, index, connected) do
    at = location(state, index)
    owner = Placement.owner(index, state.members)

    cond do
      at == state.node and owner != state.node and not is_map_key(state.handing, index) ->
        {state, effects} = hand_over(state, index, owner)
        {state, effects, :handing}

      # Gone means out of the members and disconnected: a member list may
      # lag behind a zone's announcement, and a connection may not be up
      # yet. And seen before: a node that joins reads where zones run
      # before it reaches every node that runs them, and one it has not
      # reached yet is no more gone than it is up (were it started again
      # here, its copy would run on, unheard of, for good). If it is gone,
      # those that saw it say so (below).
      gone?(state, at, connected) and owner == state.node ->
        {state, effects} = restart_lost(state, index)
        {state, effects, :restarted}

      # Gone, and another's now: that node may never have heard where it
      # ran last (the gone node started it again while it could reach this
      # node but no longer that one), and would run its own, older copy
      # on, while this node sends to the gone one. It hears it from here,
      # and starts it again as its own.
      gone?(state, at, connected) ->
        message = {:zone_at, index, at, epoch(state, index), :restarted}
        {state, [{:send, owner, message}], nil}

      true ->
        {state, [], nil}
    end
  end

  # A node new to this one, or that says it joined, may have read the
  # placement from a member that had not heard yet of a zone this node
  # took since, and this node's announcement did not go to it: it hears
  # now of every zone this node runs, in messages of up to `batch` zones
  # (`batch/1`). Both, a node that joins: as this node sees it new (a
  # node of a build from before a placer said it joined says nothing
  # more, and one that sees this node only as it was may never see it
  # new, nor ask), and as it says it joined, once placed (what was sent
  # before its placer ran is lost); neither can tell whether the other
  # reached it, so each zone is heard twice when both did. And of every
  # zone this node places on it: one that paused
  # and joined again may have read the placement before this node heard
  # what it announced before its pause, a zone it ran then and no longer
  # runs, for which this node stopped a copy of its own (`announced/6`);
  # it starts it again, and no zone is left where each believes the
  # other runs it. Those it hears from every member that places them
  # there: any one of them may be the only one that heard it (none, for
  # a node new to the cluster, whose share comes by handovers).
  defp introduce(%__MODULE__{locations: nil}, _newcomers), do: []
  defp introduce(_state, []), do: []

  defp introduce(state, newcomers) do
    for index <- 0..(state.zone_count - 1),
        {at, epoch} = placement(state, index),
        (at == state.node and serving?(state, index)) or at in newcomers,
        message = {:zone_at, index, at, epoch, :handed},
        newcomer <- newcomers,
        at == state.node or at == newcomer,
        do: {:send, newcomer, message}
  end

  ## Announcements

  @doc """
  Another node announces where a zone runs now. Heard while paused or not
  placed yet, it is kept (the newest per zone) and heard again once placed,
  as the placement read from a member may be older. Else it is ignored if
  what this node knows is newer (this node's own placement counts only
  while the zone runs here), and taken if not: a copy of the zone that
  still runs here, not handed away, stops, and a zone whose node is gone
  already (the news came from a third node, `connected` as for
  `members/4`) starts again here if it is this node's now.
  """
  @spec announced(t(), index(), node(), epoch(), how(), [node()]) :: result()
  def announced(state, index, node, epoch, how, connected),
    do: state |> hear(index, node, epoch, how, connected) |> flush()

  defp hear(state, index, node, epoch, how, _connected)
       when state.paused or state.locations == nil do
    early =
      case state.early do
        %{^index => {first, known, _how}} ->
          if newer?({first, known}, {node, epoch}),
            do: state.early,
            else: Map.put(state.early, index, {node, epoch, how})

        early ->
          Map.put(early, index, {node, epoch, how})
      end

    {%{state | early: early}, []}
  end

  defp hear(state, index, node, epoch, how, connected) do
    {at, mine} = known = placement(state, index)
    # A zone "restarted" on a node not connected here is word from a node
    # that saw that one gone (`settle_zone/3`): so it is, here too.
    state =
      if how == :restarted and node != state.node and node not in connected,
        do: see(state, [node]),
        else: state

    cond do
      # Passed on by a third node, or heard twice: nothing new, unless the
      # node is gone and the zone this node's to start again.
      known == {node, epoch} and how == :restarted and node != state.node ->
        {state, effects, _} = settle_zone(state, index, connected)
        {state, effects}

      known == {node, epoch} ->
        {state, []}

      epoch < mine ->
        {state,
         [
           {:log, :info,
            "zone #{index}: a stale announcement placing it on #{node} (epoch #{epoch}) ignored"}
           | answer_stale(state, index, node, connected)
         ]}

      # Two nodes started it at once (each saw other members), or each
      # took it at the same epoch: the first by name keeps it, on every
      # node. This node's placement of its own counts only if it runs it.
      newer?(known, {node, epoch}) and (at != state.node or index in state.running) ->
        {state, answer_stale(state, index, node, connected)}

      # Told that this node runs a zone it does not run, at a newer
      # placement than it knows: that run was lost (this node paused after
      # it announced it, and read the placement again from a member that
      # had not heard it yet). Placed there first, the zone starts again
      # here, empty, as a lost node's does, at the next epoch.
      node == state.node and index not in state.running ->
        {state, _located} = locate(state, index, node, epoch)
        {state, effects} = restart_lost(state, index)
        {state, settled, _} = settle_zone(state, index, connected)

        {state,
         [
           {:log, :warning,
            "zone #{index}: placed here at epoch #{epoch}, where it no longer runs; " <>
              "started again here, empty"}
           | effects
         ] ++ [{:recovered, [index]}] ++ settled}

      true ->
        {state, effects} = drop_stale_copy(state, index, node)
        {state, located} = locate(state, index, node, epoch)
        recovered = if how == :restarted, do: [{:recovered, [index]}], else: []
        {state, settled, _} = settle_zone(state, index, connected)
        {state, effects ++ located ++ recovered ++ settled}
    end
  end

  @doc """
  Announcements of many zones in one message (`batch/1`): each heard as
  `announced/6` hears it, in order; the zones recovered among them told
  at once, at the end.
  """
  @spec announced_all(t(), [{index(), node(), epoch(), how()}], [node()]) :: result()
  def announced_all(state, zones, connected) do
    {state, effects, recovered} =
      Enum.reduce(zones, {state, [], []}, fn {index, node, epoch, how},
                                             {state, effects, recovered} ->
        {state, more} = hear(state, index, node, epoch, how, connected)
        {more, here} = Enum.split_with(more, &(not match?({:recovered, _}, &1)))
        {state, [more | effects], [Enum.flat_map(here, &elem(&1, 1)) | recovered]}
      end)

    recovered =
      case recovered |> Enum.reverse() |> Enum.concat() do
        [] -> []
        indexes -> [{:recovered, indexes}]
      end

    {state, Enum.concat(Enum.reverse(effects)) ++ recovered} |> batch() |> flush()
  end

  # A node that announces an older placement than this one knows may run
  # a copy of the zone nobody else sends to: one that took the zone while
  # it did not see the node that started it again, and never heard of it
  # (that news went to the members of the moment), or one that handed
  # such a copy on. It hears the newer placement back, and its copy stops,
  # its entities' owners told (`drop_stale_copy/3`); else it would run on
  # for good, with whatever its own clients and neighbours send it. A node
  # not connected is not called (a send would wait for the connection).
  defp answer_stale(state, index, node, connected) do
    {at, epoch} = placement(state, index)

    if node != state.node and node in connected,
      do: [{:send, node, {:zone_at, index, at, epoch, :handed}}],
      else: []
  end

  # Another node announces a zone that still runs here, not handed away:
  # a handover whose answer timed out after the new owner took the zone
  # kept it here too. The newer placement wins; this copy, which its
  # clients' entities have left with the rows it handed over, goes. Or
  # another node started it again, empty, without this node hearing (it
  # lost the zone's node before this one did), which it may hear as a
  # handover (a node that tells a newcomer what it runs does not say how
  # it came to run it): the entities of this copy are lost with it. Which
  # is which, per entity, the owners' nodes know: each has the holder it
  # last heard of (`{:forget, index}`).
  defp drop_stale_copy(state, index, node) do
    if node != state.node and serving?(state, index) do
      {state, stop} = stop_zone(state, index)

      {state,
       [{:log, :warning, "zone #{index}: runs on #{node} now; the copy here stops"}] ++
         stop ++ [{:forget, index}]}
    else
      {state, []}
    end
  end

  @doc """
  A node that stopped on purpose could not hand this zone over, and stays
  up (its world stopped, not its node): the zone's new owner starts it
  again, empty, as it would a lost node's. That node may be a member
  again already (its placer started again by its supervisor): the zone
  is its own then, and goes to it at once.
  """
  @spec abandoned(t(), index(), node(), [node()]) :: result()
  def abandoned(state, index, from, connected)
      when not state.paused and state.locations != nil do
    if location(state, index) == from do
      {state, effects} = restart_lost(state, index)
      {state, settled, _} = settle_zone(state, index, connected)

      flush(
        {state,
         [
           {:log, :warning,
            "zone #{index}: #{from} stopped without handing it over; started again here, empty"}
           | effects
         ] ++ [{:recovered, [index]}] ++ settled}
      )
    else
      {state, []}
    end
  end

  def abandoned(state, _index, _from, _connected), do: {state, []}

  ## Handovers

  defp hand_over(state, index, to) do
    epoch = epoch(state, index) + 1

    {%{
       state
       | handing: Map.put(state.handing, index, {to, epoch}),
         retiring: MapSet.put(state.retiring, index)
     }, [{:hand_over, index, to, epoch}]}
  end

  @doc """
  A handover ended: `:normal` when the new owner took the zone; else it
  failed, unless the new owner took it and said so though its answer did
  not come back in time. A zone that stays is tried again a little later;
  but one whose handover the node ended as it stops (`:stopping`) is
  handed over again as it leaves (`leave/1`). Refused as stale
  (`{:error, :stale}`, or `{:error, :stale_call}` with the rest of its
  call), the copy here stops where the new owner's answer, heard first,
  places the zone on another node; else it stays until that answer comes.

  The new owner may have handed the zone on already (its members changed
  as it took it), and the node it went to may have said so first: a
  newer placement heard before the end stays. Placed on the new owner at
  that later epoch instead, the zone would be where it no longer runs,
  and at one epoch a node first by name wins: the true one would be
  ignored, here for good.

  Or the zone came back here before the end did (the new owner handed it
  straight back, as it left; or it was lost with that node and started
  again here): the copy that runs here now is no forwarding one to
  retire, and, taken while this handover was under way, is settled now.
  """
  @spec handover_ended(t(), index(), term()) :: result()
  def handover_ended(state, index, reason), do: handovers_ended(state, [{index, reason}])

  @doc """
  Many handovers ended, each as `handover_ended/3` ends one, in order,
  and the placement written once: a batch of zones handed to one node
  ends together, and a write a zone would copy the whole placement each.
  Those that failed are tried again together (`settle_all/3`), last.
  """
  @spec handovers_ended(t(), [{index(), term()}]) :: result()
  def handovers_ended(state, ended) do
    {state, effects} =
      Enum.reduce(ended, {state, []}, fn {index, reason}, {state, effects} ->
        {state, more} = end_handover(state, index, reason)
        {state, [more | effects]}
      end)

    {retries, effects} =
      effects
      |> Enum.reverse()
      |> Enum.concat()
      |> Enum.split_with(&match?({:send_after, {:settle, _index}, _ms}, &1))

    retry =
      case retries do
        [] ->
          []

        [one] ->
          [one]

        many ->
          [{:send_after, {:settle_all, for({_, {:settle, i}, _} <- many, do: i)}, @settle_retry}]
      end

    flush({state, effects ++ retry})
  end

  defp end_handover(state, index, reason) do
    {{to, epoch}, handing} = Map.pop!(state.handing, index)
    state = %{state | handing: handing}
    {at, _} = known = placement(state, index)
    taken = at != state.node and not newer?({to, epoch}, known)
    back = at == state.node and newer?(known, {to, epoch}) and serving?(state, index)

    case reason do
      _reason when back ->
        {state,
         [
           {:log, :info, "zone #{index}: handed to #{to}, it runs here again"},
           {:send_self, {:settle, index}}
         ]}

      :normal ->
        # Placed there already when the new owner's announcement came first.
        {state, located} =
          if known == {to, epoch} or newer?(known, {to, epoch}),
            do: {state, []},
            else: locate(state, index, to, epoch)

        {state, retire} = retire(state, index)
        {state, located ++ retire}

      # Refused as stale: the zone was placed anew while this node ran
      # the copy it handed (`take_over_all/4`). Where the refusal's answer
      # came first, naming another node, it runs there, and this copy
      # stops, its entities' owners told (`drop_stale_copy/3`); else that
      # answer comes later, and stops it then. So too for a zone of a
      # call refused whole, as stale, by a node of an older build
      # (`:stale_call`): it may be the stale one.
      {:error, stale} when stale in [:stale, :stale_call] and at != state.node ->
        {state, cancel} = cancel_retiring(state, index)
        {state, stop} = stop_zone(state, index)

        {state,
         [
           {:log, :warning,
            "zone #{index}: #{to} refused it, as it runs on #{at} now; the copy here stops"}
           | cancel
         ] ++ stop ++ [{:forget, index}]}

      # What the zone held goes to `to`, the node it was handed to, though
      # it may have gone on from there already (`known` is newer): it
      # takes a second hop, passed on by that node's copy as it retires,
      # as what reaches a zone handed away is after a normal end too (the
      # handover names `to`). It moves no placement, so no zone is lost
      # or misplaced; only a message that comes once that copy stopped is
      # lost, as one would be after any retire.
      _reason when taken ->
        {state, retire} = retire(state, index)

        {state,
         [
           {:log, :warning, "zone #{index}: #{to} took it, though its answer came late"},
           {:handed_to, index, to}
         ] ++ retire}

      # The node stops, and ended the handover unfinished
      # (`Grove.World.Placer`): the zone stays here (told so, if it was
      # given), and is handed over again as the node leaves (`leave/1`).
      :stopping ->
        {state, cancel} = cancel_retiring(state, index)
        {state, [{:keep, index} | cancel]}

      reason ->
        {state, cancel} = cancel_retiring(state, index)

        {state,
         [
           {:log, :error,
            "zone #{index}: handing it to #{to} failed: #{inspect(reason)}; kept here"},
           {:keep, index},
           {:send_after, {:settle, index}, @settle_retry}
         ] ++ cancel}
    end
  end

  # The stop of a zone handed away, set for later (`retired/3`).
  defp retire(state, index) do
    timer = state.timers_set

    {%{
       state
       | retire_timers: Map.put(state.retire_timers, index, timer),
         timers_set: timer + 1
     }, [{:retire, index, timer}]}
  end

  @doc """
  A zone handed away has passed on what came late long enough: it stops,
  if `timer` is the one set for it last. A timer cancelled as it went
  off sent its message all the same: the zone may have come back here
  since (handed straight back), and be handed away again, retiring once
  more; that message stops no copy, and the live one runs on.
  """
  @spec retired(t(), index(), non_neg_integer()) :: result()
  def retired(state, index, timer) do
    case state.retire_timers do
      %{^index => ^timer} ->
        stop_zone(
          %{
            state
            | retiring: MapSet.delete(state.retiring, index),
              retire_timers: Map.delete(state.retire_timers, index)
          },
          index
        )

      _stale ->
        {state, []}
    end
  end

  @doc """
  Another node (`from`) hands this one a zone, with its rows,
  subscriptions and view number, at `epoch`: as the one zone of a
  batch (`take_over_all/4`).
  """
  @spec take_over(t(), index(), term(), list(), non_neg_integer(), epoch(), [node()], node()) ::
          {:ok, t(), [effect()]}
          | {:error, :paused | :starting}
          | {:error, :stale, [effect()]}
  def take_over(state, index, rows, subscriptions, seq, epoch, connected, from),
    do: take_over_all(state, [{index, rows, subscriptions, seq, epoch}], connected, from)

  @doc """
  Many zones handed over by one node (`from`) at once, each with its
  rows, subscriptions and view number, at an epoch (`{index, rows,
  subscriptions, seq, epoch}`): refused all together while paused or
  not placed yet (they stay where they are, and are offered again), or
  if this node knows a placement of any of them at its epoch or a later
  one (`stale/4`), none taken; else each taken, started, and handed on
  at once if members changed meanwhile, in order, and announced to each
  member in a few messages (`batch/1`), as a node that joins hears what
  a member serves.
  """
  @spec take_over_all(
          t(),
          [{index(), term(), list(), non_neg_integer(), epoch()}],
          [node()],
          node()
        ) ::
          {:ok, t(), [effect()]}
          | {:error, :paused | :starting}
          | {:error, :stale, [effect()]}
  def take_over_all(%__MODULE__{paused: true}, _zones, _connected, _from), do: {:error, :paused}

  def take_over_all(%__MODULE__{locations: nil}, _zones, _connected, _from),
    do: {:error, :starting}

  def take_over_all(state, zones, connected, from) do
    epochs = for {index, _rows, _subscriptions, _seq, epoch} <- zones, do: {index, epoch}

    case stale(state, epochs, from, connected) do
      [] ->
        {state, effects} = state |> take_all(zones, connected) |> batch() |> flush()
        {:ok, state, effects}

      refused ->
        {:error, :stale, refused}
    end
  end

  @doc """
  Many zones handed over by one node (`from`) at once, as
  `take_over_all/4` takes them, but those stale here (`stale/4`) refused
  alone: the others taken all the same. Returns the indexes refused too
  (none when every zone was taken): a node that stops hands over every
  zone it runs, and one it ran stale would have its fresh ones refused
  with it, each then started again, empty, on its owner.
  """
  @spec take_over_fresh(
          t(),
          [{index(), term(), list(), non_neg_integer(), epoch()}],
          [node()],
          node()
        ) :: {:ok, t(), [effect()], [index()]} | {:error, :paused | :starting}
  def take_over_fresh(%__MODULE__{paused: true}, _zones, _connected, _from),
    do: {:error, :paused}

  def take_over_fresh(%__MODULE__{locations: nil}, _zones, _connected, _from),
    do: {:error, :starting}

  def take_over_fresh(state, zones, connected, from) do
    {refused, fresh} =
      Enum.split_with(zones, fn {index, _rows, _subscriptions, _seq, epoch} ->
        epoch <= epoch(state, index)
      end)

    epochs = for {index, _rows, _subscriptions, _seq, epoch} <- refused, do: {index, epoch}
    {state, effects} = take_all(state, fresh, connected)
    {state, effects} = flush(batch({state, refusal(state, epochs, from, connected) ++ effects}))
    {:ok, state, effects, for({index, _epoch} <- epochs, do: index)}
  end

  # Each zone taken, in order (`take_over_all/4`).
  defp take_all(state, zones, connected) do
    {state, effects} =
      Enum.reduce(zones, {state, []}, fn {index, rows, subscriptions, seq, epoch},
                                         {state, effects} ->
        {state, more} = take(state, index, rows, subscriptions, seq, epoch, connected)
        {state, [more | effects]}
      end)

    {state, effects |> Enum.reverse() |> Enum.concat()}
  end

  # A handover of a zone at an epoch this node knows a placement of
  # already, or a later one, is stale: the zone has moved on since the
  # node that hands it over placed it (it was started again elsewhere
  # while that node was taken for lost, or this node took it at that
  # epoch already, and the answer never reached the sender). Taken, it
  # would overwrite the newer placement here, and run beside the copy
  # that placement names. Refused, the zones stay with the sender, which
  # is told where each runs now, as a node that announces an older
  # placement is (`answer_stale/4`): its copy stops once it hears it.
  # The effects of the refusal, or none when no zone is stale: one line
  # logged for the lot, and the zones counted.
  defp stale(state, epochs, from, connected) do
    case for({index, epoch} <- epochs, epoch <= epoch(state, index), do: {index, epoch}) do
      [] -> []
      stale -> {state, refusal(state, stale, from, connected)} |> batch() |> elem(1)
    end
  end

  # The refusal of zones handed over stale (`{index, epoch}` each), not
  # batched: one line logged, the zones counted, and the sender told
  # where each runs.
  defp refusal(_state, [], _from, _connected), do: []

  defp refusal(state, stale, from, connected) do
    indexes = for {index, _epoch} <- stale, do: index

    [
      {:log, :warning,
       "zones #{inspect(indexes, charlists: :as_lists)}: handed over by #{from} at " <>
         "epochs #{inspect(Enum.map(stale, &elem(&1, 1)), charlists: :as_lists)}, " <>
         "no newer than those known here; refused, and #{from} told where they run"},
      {:count, :zone_handovers_stale, length(stale)}
      | Enum.flat_map(indexes, &answer_stale(state, &1, from, connected))
    ] ++ left_behind(state, indexes, from)
  end

  # A zone refused as stale that this node places on the sender itself,
  # at an epoch the sender never knew (it paused, and read the placement
  # again from a member that had not heard it yet), from a sender that
  # is no member (it said it leaves): that node stops without it, and
  # says nothing of a zone refused as stale (`Grove.World.Placer`), so
  # it starts again here, as one it abandoned would (`abandoned/4`).
  defp left_behind(state, indexes, from) do
    if from in state.members,
      do: [],
      else:
        for(
          index <- indexes,
          location(state, index) == from,
          do: {:send_self, {:abandoned, index, from}}
        )
  end

  defp take(state, index, rows, subscriptions, seq, epoch, connected) do
    {state, dropped} = drop_forwarding(state, index)
    {state, start} = start_zone(state, index)
    {state, located} = locate(state, index, state.node, epoch)
    announced = announce(state, index, :handed)
    # Members may have changed again while it came: it may belong elsewhere already.
    {state, settled, _} = settle_zone(state, index, connected)

    {state,
     dropped ++
       [{:take_rows, index, rows, subscriptions, seq}] ++
       start ++ located ++ announced ++ settled}
  end

  @doc "A handover under way failed while the node stops: the zone is no longer retiring."
  @spec cancel_retiring(t(), index()) :: result()
  def cancel_retiring(state, index) do
    if index in state.retiring do
      {%{
         state
         | retiring: MapSet.delete(state.retiring, index),
           retire_timers: Map.delete(state.retire_timers, index)
       }, [{:cancel_retire, index}]}
    else
      {state, []}
    end
  end

  @doc """
  What a node that stops on purpose hands over, once the handovers under
  way are done: every zone it serves, each to its owner among the others
  at the next epoch.
  """
  @spec leave(t()) :: [{index(), node(), epoch()}]
  def leave(state) do
    others = state.members -- [state.node]

    for index <- 0..(state.zone_count - 1),
        others != [],
        serving?(state, index),
        do: {index, Placement.owner(index, others), epoch(state, index) + 1}
  end

  ## Lost and paused

  # A zone whose node is gone runs again here, empty, at the next epoch.
  # Its viewers here hold numbers of the lost run: past them, so that they
  # ask the new one for a snapshot instead of reading its deltas onto what
  # they had.
  defp restart_lost(state, index) do
    {state, dropped} = drop_forwarding(state, index)
    {state, start} = start_zone(state, index)
    {state, located} = locate(state, index, state.node, epoch(state, index) + 1)

    {state,
     [{:reset_feed, index}] ++
       dropped ++
       [{:fetch_life, [index]}] ++
       start ++ located ++ [{:wake_saved, index}] ++ announce(state, index, :restarted)}
  end

  @doc """
  This node's side has no quorum: its zones stop, and it answers no
  placement until it has one again.
  """
  @spec pause(t()) :: result()
  def pause(state) do
    {%{
       state
       | paused: true,
         handing: %{},
         retiring: MapSet.new(),
         retire_timers: %{},
         running: MapSet.new()
     }, [{:pause}]}
  end

  ## Helpers

  defp serving?(state, index), do: index in state.running and index not in state.retiring

  defp see(state, nodes), do: %{state | seen: Enum.into(nodes, state.seen)}

  defp gone?(state, node, connected) do
    node != state.node and node not in state.members and node not in connected and
      node in state.seen
  end

  # A zone that starts again on a node that had handed it away: its old,
  # forwarding copy goes first.
  defp drop_forwarding(state, index) do
    if index in state.retiring do
      {state, cancel} = cancel_retiring(state, index)
      {state, stop} = stop_zone(state, index)
      {state, cancel ++ stop}
    else
      {state, []}
    end
  end

  defp start_zone(state, index),
    do: {%{state | running: MapSet.put(state.running, index)}, [{:start_zone, index}]}

  defp stop_zone(state, index),
    do: {%{state | running: MapSet.delete(state.running, index)}, [{:stop_zone, index}]}

  defp locate(state, index, node, epoch) do
    {%{state | located: Map.put(state.located, index, {node, epoch})},
     [{:locate, index, node, epoch}]}
  end

  # What rules placed, into the tuple once it is an eighth of the zones
  # (or a few, in a small world): the tuple is copied whole then, once
  # per eighth of the zones placed, which costs each placement a few
  # words, whatever the world's size.
  defp flush({state, effects}), do: {flush(state), effects}

  defp flush(%__MODULE__{located: located} = state) do
    if map_size(located) > max(@flush_least, div(state.zone_count, 8)),
      do: build(state),
      else: state
  end

  defp build(%__MODULE__{located: located} = state)
       when map_size(located) == 0 or state.locations == nil,
       do: state

  defp build(%__MODULE__{located: located} = state) do
    {list, _index} =
      state.locations
      |> Tuple.to_list()
      |> Enum.map_reduce(0, fn placement, index ->
        {Map.get(located, index, placement), index + 1}
      end)

    %{state | locations: List.to_tuple(list), located: %{}}
  end

  defp announce(state, index, how) do
    message = {:zone_at, index, state.node, epoch(state, index), how}
    for member <- state.members, member != state.node, do: {:send, member, message}
  end

  # The zones announced to one node go in one message, `batch` zones at
  # most (`{:zones_at, [{index, node, epoch, how}]}`), heard in order
  # (`announced_all/3`): a node that joins hears of every zone each
  # member serves, and a member of a world of 100,000 zones would send it
  # tens of thousands of messages in one turn, which a busy distribution
  # link suspends. The message goes after the last of its zones was
  # announced (after what the effects do for each, a zone started again
  # woken from its save first), and before anything else sent to that
  # node, which comes after it as before, and before any handover: a
  # zone announced, then handed to its owner at the next epoch (a node
  # that joins hands on what it read was its own), would reach the owner
  # after the handover, stale, and be answered for nothing. A zone alone
  # is announced as it was.
  defp batch({state, effects}) do
    {out, open} =
      Enum.reduce(effects, {[], %{}}, fn
        {:send, to, {:zone_at, index, node, epoch, how}}, {out, open} ->
          zone = {index, node, epoch, how}
          {out, Map.update(open, to, [zone], &[zone | &1])}

        {:send, to, _message} = effect, {out, open} when is_map_key(open, to) ->
          {zones, open} = Map.pop!(open, to)
          {[effect | Enum.reverse(announcements(state, to, zones), out)], open}

        {:hand_over, _index, _to, _epoch} = effect, {out, open} when open != %{} ->
          sent = Enum.flat_map(open, fn {to, zones} -> announcements(state, to, zones) end)
          {[effect | Enum.reverse(sent, out)], %{}}

        effect, {out, open} ->
          {[effect | out], open}
      end)

    {state,
     Enum.reverse(out, Enum.flat_map(open, fn {to, zones} -> announcements(state, to, zones) end))}
  end

  # Zones, last first, announced to `to`.
  defp announcements(_state, to, [{index, node, epoch, how}]),
    do: [{:send, to, {:zone_at, index, node, epoch, how}}]

  defp announcements(state, to, zones) do
    for chunk <- zones |> Enum.reverse() |> Enum.chunk_every(state.batch),
        do: {:send, to, {:zones_at, chunk}}
  end
end
