defmodule Grove.World.Zone.Handoff do
  @moduledoc false
  # The rules by which zones pass entities to each other and settle who
  # owns them, as plain functions on `Zone.State`: a move that crosses the
  # zone's border, an arrival, the answer to one (`arrived` or `refused`),
  # the operations deferred meanwhile (replayed here or forwarded), a leave,
  # an owner that died, and a handoff that never got its answer.
  #
  # Each returns the new state and the effects the zone process carries out,
  # in order (`Grove.World.Zone`'s `run_effects/2`), as `Phoenix.Tracker.State`
  # returns what its shard then sends:
  #
  #   * `{:send, zone, message}` - a cast to another zone, in the messages
  #     zones exchange on the wire: `{:arrive, entity, cell, from, tag}`,
  #     `{:arrived, id, zone}`, `{:refused, id, owner, tag, reason}`,
  #     `{:move, id, direction, owner, tag, hops}` and
  #     `{:leave, id, owner, from, hops}`;
  #   * `{:reply, owner, id, tag, outcome}` - a move's outcome to its owner;
  #   * `{:answer, from, result}` - the answer to a leave's call;
  #   * `{:adopt, entity}` - an entity arrived: its row, its directory entry
  #     and a monitor on its owner;
  #   * `{:view, entity, before}` - a viewer arrived from `before`: its
  #     subscriptions follow it;
  #   * `{:moved, entity, from}` - a replayed move inside the zone, carried
  #     out like any other (row, density, view);
  #   * `{:let_go, entity}` - another zone owns the entity now: its row and
  #     monitor go, its directory entry and population stay with the new owner;
  #   * `{:dropped, entity}` - the entity is gone (it left, or its owner died),
  #     with everything that refers to it;
  #   * `{:directory, id, zone}` - on this node, the entity moved on to `zone`
  #     (unless the directory already names a later one);
  #   * `{:count, stat}` - one more in a `Grove.World.Stats` counter;
  #   * `{:acted, owner, id, tag, outcome}` - an action's outcome to its
  #     owner (actions are `Zone.Game`'s; they wait behind a handoff and
  #     follow their entity like moves).
  #
  # A move that stays inside the zone, by far the most common, or that is
  # refused there, returns a plain result and allocates no effects list.
  #
  # The directory is read through `locate`, a function the zone passes in
  # (an `:atomics` read in a world, a map in a simulation). Functions that
  # may replay deferred moves take an `env` with it, the time (for the move
  # rate) and whether the zone is shedding load (`busy`), in which case
  # replayed moves are answered `:busy` like any other.

  alias Grove.World.{Entity, Grid}
  alias Grove.World.Zone.State

  # How many times a move may be forwarded to follow its entity between zones.
  @max_hops 4

  @typedoc "Reads the directory: the zone that owns an entity now, or nil."
  @type locate :: (Entity.id() -> Grid.zone_index() | nil)

  @type env :: %{locate: locate(), now: integer(), busy: boolean()}

  @type outcome :: {:ok, Grid.cell()} | {:rejected, atom()}

  @type effect ::
          {:send, Grid.zone_index(), tuple()}
          | {:reply, pid(), Entity.id(), term(), outcome()}
          | {:answer, GenServer.from(), :ok | {:error, atom()}}
          | {:adopt, Entity.t()}
          | {:view, Entity.t(), Grid.cell()}
          | {:moved, Entity.t(), Grid.cell()}
          | {:let_go, Entity.t()}
          | {:dropped, Entity.t()}
          | {:directory, Entity.id(), Grid.zone_index()}
          | {:count, atom()}
          | {:acted, pid(), Entity.id(), term(), tuple()}

  @doc """
  One move of an entity owned by `owner`, `hops` times forwarded already.
  Moved or refused here, the plain result; else `:pending` with what to
  send: the move became a handoff, was deferred behind one, or follows
  its entity to the zone the directory names.
  """
  @spec move(
          State.t(),
          Entity.id(),
          Grid.direction(),
          pid(),
          term(),
          non_neg_integer(),
          integer(),
          locate()
        ) ::
          {:moved, Entity.t(), Grid.cell(), State.t()}
          | {:rejected, State.reason() | :busy | :unknown_entity, State.t()}
          | {:pending, [effect()], State.t()}
  def move(state, id, direction, owner, tag, hops, now, locate) do
    case State.apply_move(state, id, direction, owner, tag, now) do
      {:moved, _entity, _from, _state} = moved ->
        moved

      {:rejected, _reason, _state} = rejected ->
        rejected

      {:handoff, entity, to, target, state} ->
        # The answer comes back as `arrived` or `refused`; the outcome comes
        # from the target, or from here when it refuses.
        arrive = {:arrive, entity, target, state.index, tag}
        {:pending, [{:count, :handoffs}, {:send, to, arrive}], state}

      {:leaving, state} ->
        case State.defer(state, id, {:move, direction, owner, tag}) do
          {:ok, state} -> {:pending, [], state}
          {:error, :busy} -> {:rejected, :busy, state}
        end

      {:unknown, state} ->
        case follow(state, id, hops, locate) do
          {:ok, to} ->
            forward = {:move, id, direction, owner, tag, hops + 1}
            {:pending, [{:count, :forwards}, {:send, to, forward}], state}

          :error ->
            {:rejected, :unknown_entity, state}
        end
    end
  end

  @doc """
  An entity handed over by zone `from` for `cell`: taken in (the mover gets
  its outcome from here, `from` hears `arrived`) or refused (`from` hears
  `refused` and answers the mover itself).
  """
  @spec arrive(State.t(), Entity.t(), Grid.cell(), Grid.zone_index(), term()) ::
          {[effect()], State.t()}
  def arrive(state, %Entity{} = entity, cell, from, tag) do
    case State.accept_arrival(state, entity, cell) do
      {:ok, arrived, state} ->
        effects = [
          {:adopt, arrived},
          {:send, from, {:arrived, arrived.id, state.index}},
          {:reply, arrived.owner, arrived.id, tag, {:ok, cell}}
        ]

        if arrived.updates == :view,
          do: {effects ++ [{:view, arrived, {entity.x, entity.y}}], state},
          else: {effects, state}

      {:rejected, reason, state} ->
        {[{:send, from, {:refused, entity.id, entity.owner, tag, reason}}], state}
    end
  end

  @doc """
  Zone `to` took the entity: it is let go here, and what was deferred
  meanwhile follows it there.
  """
  @spec arrived(State.t(), Entity.id(), Grid.zone_index(), env()) :: {[effect()], State.t()}
  def arrived(state, id, to, env) do
    {entity, deferred, state} = State.finish_handoff(state, id)
    # On this node, the entity is now where it went (the target, on another
    # node, wrote only its own node's directory): the deferred operations
    # follow the directory as the first effect leaves it.
    index = state.index

    locate = fn
      ^id ->
        case env.locate.(id) do
          ^index -> to
          other -> other
        end

      other ->
        env.locate.(other)
    end

    case entity do
      nil ->
        {[{:directory, id, to}], state}

      entity ->
        forwarded = Enum.flat_map(deferred, &forward(state, id, &1, locate))
        {[{:directory, id, to}, {:let_go, entity} | forwarded], state}
    end
  end

  @doc """
  The target zone refused the entity: the move that started the handoff
  gets the refusal, and what was deferred meanwhile is applied here, in order.
  """
  @spec refused(State.t(), Entity.id(), pid(), term(), atom(), env()) :: {[effect()], State.t()}
  def refused(state, id, owner, tag, reason, env) do
    case State.cancel_handoff(state, id) do
      {:ok, tag, deferred, state} ->
        {replayed, state} = replay(state, id, deferred, env)

        {[{:count, :handoffs_refused}, {:reply, owner, id, tag, {:rejected, reason}} | replayed],
         state}

      {:error, :not_leaving} ->
        # This zone restarted during the handoff; the move still gets its outcome.
        {[{:reply, owner, id, tag, {:rejected, reason}}], state}
    end
  end

  @doc """
  Settles the handoffs started before `cutoff` that had no answer (their
  target died with it) by the directory: an entity it places elsewhere has
  arrived there; else it stays here and its move is answered `:busy`.
  """
  @spec expire(State.t(), integer(), env()) :: {[effect()], State.t()}
  def expire(state, cutoff, env) do
    Enum.reduce(State.stale_handoffs(state, cutoff), {[], state}, fn id, {effects, state} ->
      {settled, state} =
        case env.locate.(id) do
          index when index != nil and index != state.index ->
            arrived(state, id, index, env)

          _ ->
            {:ok, tag, deferred, state} = State.cancel_handoff(state, id)
            {:ok, entity} = State.fetch(state, id)
            {replayed, state} = replay(state, id, deferred, env)
            {[{:reply, entity.owner, id, tag, {:rejected, :busy}} | replayed], state}
        end

      {effects ++ [{:count, :handoffs_stale} | settled], state}
    end)
  end

  @doc """
  A leave by `owner`, called by `from`, `hops` times forwarded already:
  done here, deferred behind a handoff, or sent on to the zone the
  directory names.
  """
  @spec leave(State.t(), Entity.id(), pid(), GenServer.from(), non_neg_integer(), locate()) ::
          {[effect()], State.t()}
  def leave(state, id, owner, from, hops, locate) do
    case State.fetch(state, id) do
      {:ok, %Entity{owner: ^owner}} ->
        if State.away?(state, id) do
          case State.defer(state, id, {:leave, owner, from}) do
            {:ok, state} -> {[], state}
            {:error, :busy} -> {[{:answer, from, {:error, :busy}}], state}
          end
        else
          {dropped, state} = drop(state, id)
          {dropped ++ [{:count, :leaves}, {:answer, from, :ok}], state}
        end

      {:ok, %Entity{}} ->
        {[{:answer, from, {:error, :not_owner}}], state}

      :error ->
        case follow(state, id, hops, locate) do
          {:ok, to} -> {[{:send, to, {:leave, id, owner, from, hops + 1}}], state}
          :error -> {[{:answer, from, {:error, :unknown_entity}}], state}
        end
    end
  end

  @doc """
  The owner of an entity died: the entity goes, or, mid-handoff, once the
  answer is in (the target watches the owner too once it adopts the entity,
  so only a refused handoff leaves the dropping to this zone).
  """
  @spec owner_down(State.t(), Entity.id()) :: {[effect()], State.t()}
  def owner_down(state, id) do
    if State.away?(state, id) do
      {:ok, state} = State.defer(state, id, :owner_down)
      {[], state}
    else
      drop(state, id)
    end
  end

  @doc """
  A join whose caller stopped waiting: the entity goes if it was placed
  (nobody has moved it, so it is still here).
  """
  @spec abandon(State.t(), Entity.id(), pid()) :: {[effect()], State.t()}
  def abandon(state, id, owner) do
    case State.fetch(state, id) do
      {:ok, %Entity{owner: ^owner}} ->
        {dropped, state} = drop(state, id)
        {dropped ++ [{:count, :leaves}], state}

      _ ->
        {[], state}
    end
  end

  @doc "The zone the directory names for an entity not here, while it may still be followed."
  @spec follow(State.t(), Entity.id(), non_neg_integer(), locate()) ::
          {:ok, Grid.zone_index()} | :error
  def follow(%State{index: here}, id, hops, locate) when hops < @max_hops do
    case locate.(id) do
      index when index != nil and index != here -> {:ok, index}
      _ -> :error
    end
  end

  def follow(_state, _id, _hops, _locate), do: :error

  # The entity now lives in another zone: what waited for the handoff goes there.
  defp forward(state, id, {:move, direction, owner, tag}, locate) do
    case follow(state, id, 0, locate) do
      {:ok, to} -> [{:send, to, {:move, id, direction, owner, tag, 1}}]
      :error -> [{:reply, owner, id, tag, {:rejected, :unknown_entity}}]
    end
  end

  defp forward(state, id, {:leave, owner, from}, locate) do
    case follow(state, id, 0, locate) do
      {:ok, to} -> [{:send, to, {:leave, id, owner, from, 1}}]
      :error -> [{:answer, from, {:error, :unknown_entity}}]
    end
  end

  defp forward(state, id, {:act, request, owner, tag}, locate) do
    case follow(state, id, 0, locate) do
      {:ok, to} -> [{:send, to, {:act, id, request, owner, tag, 1}}]
      :error -> [{:acted, owner, id, tag, {:rejected, :unknown_entity}}]
    end
  end

  defp forward(_state, _id, :owner_down, _locate), do: []

  @doc """
  The entity is still here (its handoff was refused, or the action it
  waited for elsewhere is answered): what waited is applied, in order.
  """
  @spec replay(State.t(), Entity.id(), [term()], env()) :: {[effect()], State.t()}
  def replay(state, id, deferred, env) do
    Enum.reduce(deferred, {[], state}, fn operation, {effects, state} ->
      {more, state} = replay_one(state, id, operation, env)
      {effects ++ more, state}
    end)
  end

  defp replay_one(state, id, {:move, _direction, owner, tag}, %{busy: true}),
    do: {[{:reply, owner, id, tag, {:rejected, :busy}}], state}

  defp replay_one(state, id, {:move, direction, owner, tag}, env) do
    case move(state, id, direction, owner, tag, 0, env.now, env.locate) do
      {:moved, entity, from, state} ->
        {[{:moved, entity, from}, {:reply, owner, id, tag, {:ok, {entity.x, entity.y}}}], state}

      {:rejected, reason, state} ->
        {[{:reply, owner, id, tag, {:rejected, reason}}], state}

      {:pending, effects, state} ->
        {effects, state}
    end
  end

  defp replay_one(state, id, {:act, _request, owner, tag}, %{busy: true}),
    do: {[{:acted, owner, id, tag, {:rejected, :busy}}], state}

  defp replay_one(state, id, {:act, request, owner, tag}, env) do
    case Grove.World.Zone.Game.act(state, id, request, owner, tag, 0, env.now, env.locate) do
      {:acted, outcome, state} -> {[{:acted, owner, id, tag, outcome}], state}
      {:pending, effects, state} -> {effects, state}
    end
  end

  defp replay_one(state, id, {:leave, owner, from}, env),
    do: leave(state, id, owner, from, 0, env.locate)

  # A move replayed before it may have started a handoff again: the
  # entity then goes once that one is settled, with what waits behind it.
  defp replay_one(state, id, :owner_down, _env), do: owner_down(state, id)

  defp drop(state, id) do
    case State.drop(state, id) do
      {nil, state} -> {[], state}
      {entity, state} -> {[{:dropped, entity}], state}
    end
  end
end
