defmodule Grove.Test.StubWorld do
  @moduledoc """
  A `Grove.World.Client` that decides nothing itself: it tells a test
  process what the actors ask and answers as the test set it up, so tests
  can put actors in front of a world that is slow, refuses or never
  answers. Grid and terrain come from a real world.

  Its world term is made by `new/2`:

    * `:joins` - `:ok` (every join succeeds), `{:busy, n}` (the first `n`
      joins, in all, are refused `:busy`), `{:busy_after, n}` (the first
      `n` succeed, every later one is refused), or `:block` (each join tells the
      test `{:stub_joining, pid}` and waits for `:stub_go`, counting how many
      wait at once; see `max_joining/1`)
    * `:moves` - `:silent` (moves are never answered) or `:answer` (each
      gets `{:ok, {0, 0}}` at once)
    * `:seen` - whether anyone watches every entity, until `see/2` changes
      it (`zone_watched?/2`; default `true`)
    * `:zones` - how many zones the entities stand in, an entity's zone its
      id modulo that (default 1: all in zone 0)
    * `:seen_zones` - zones watched whatever `:seen` says (default none)

  It counts the times it was asked an entity's zone (`lookups/1`).

  Every batch of moves is reported as `{:stub_moves, herd, moves}`, every
  finished join as `{:stub_join, herd, result}`.
  """

  @behaviour Grove.World.Client

  alias Grove.World

  defstruct [
    :test,
    :world,
    :joins,
    :moves,
    :refusals,
    :joining,
    :seen,
    :zones,
    :seen_zones,
    :lookups
  ]

  @doc "A stub world in front of the real world `world`, reporting to the calling process."
  def new(world, opts) do
    joins = Keyword.get(opts, :joins, :ok)

    %__MODULE__{
      test: self(),
      world: world,
      joins: if(is_tuple(joins), do: elem(joins, 0), else: joins),
      moves: Keyword.get(opts, :moves, :silent),
      refusals:
        case joins do
          {kind, n} when kind in [:busy, :busy_after] ->
            tap(:atomics.new(1, signed: true), &:atomics.put(&1, 1, n))

          _ ->
            nil
        end,
      # Joins waiting now, and the most that ever waited at once.
      joining: :atomics.new(2, signed: true),
      seen: tap(:atomics.new(1, []), &:atomics.put(&1, 1, seen(Keyword.get(opts, :seen, true)))),
      zones: Keyword.get(opts, :zones, 1),
      seen_zones: Keyword.get(opts, :seen_zones, []),
      lookups: :counters.new(1, [])
    }
  end

  @doc "How many times an entity's zone was asked (`zone_index/2`)."
  def lookups(%__MODULE__{lookups: lookups}), do: :counters.get(lookups, 1)

  @doc "Makes every entity seen, or not, from now on."
  def see(%__MODULE__{seen: seen}, value) when is_boolean(value),
    do: :atomics.put(seen, 1, seen(value))

  defp seen(true), do: 1
  defp seen(false), do: 0

  @doc "The most joins that were waiting at once (`joins: :block`)."
  def max_joining(%__MODULE__{joining: joining}), do: :atomics.get(joining, 2)

  @impl true
  def join(%__MODULE__{} = stub, _opts) do
    result =
      case stub.joins do
        :ok ->
          joined()

        :busy ->
          if :atomics.sub_get(stub.refusals, 1, 1) >= 0, do: {:error, :busy}, else: joined()

        :busy_after ->
          if :atomics.sub_get(stub.refusals, 1, 1) >= 0, do: joined(), else: {:error, :busy}

        :block ->
          now = :atomics.add_get(stub.joining, 1, 1)
          record_max(stub.joining, now)
          send(stub.test, {:stub_joining, self()})

          receive do
            :stub_go -> :ok
          end

          :atomics.sub(stub.joining, 1, 1)
          joined()
      end

    send(stub.test, {:stub_join, self(), result})
    result
  end

  @impl true
  def move(stub, id, direction, tag), do: move_many(stub, [{id, direction, tag}])

  @impl true
  def move_many(stub, moves) do
    send(stub.test, {:stub_moves, self(), moves})

    if stub.moves == :answer,
      do:
        send(self(), {:grove_moves, for({id, _dir, tag} <- moves, do: {id, tag, {:ok, {0, 0}}})})

    :ok
  end

  @impl true
  def leave(_stub, _id), do: :ok

  @impl true
  def zone_index(%__MODULE__{zones: zones, lookups: lookups}, id) do
    :counters.add(lookups, 1, 1)
    rem(id, zones)
  end

  @impl true
  def zone_watched?(%__MODULE__{seen: seen, seen_zones: seen_zones}, zone),
    do: zone in seen_zones or :atomics.get(seen, 1) == 1

  @impl true
  def grid(stub), do: World.grid(stub.world)

  @impl true
  def terrain(stub), do: World.terrain(stub.world)

  defp joined, do: {:ok, System.unique_integer([:positive, :monotonic]), {0, 0}}

  defp record_max(joining, now) do
    seen = :atomics.get(joining, 2)

    if now > seen and :atomics.compare_exchange(joining, 2, seen, now) != :ok,
      do: record_max(joining, now),
      else: :ok
  end
end
