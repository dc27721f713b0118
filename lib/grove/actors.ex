defmodule Grove.Actors do
  @moduledoc """
  AI actors of any kinds that live in the world through exactly the
  public client API (`Grove.World.Client`), like any player would.

  A kind (a `Grove.Actor`: the random `Grove.Actors.Walker`, the
  `Grove.Actors.Wanderer`, flocking `Grove.Actors.Sheep`, or one of your
  own) decides where each of its actors steps; this module runs them. Each
  actor is an entity with its own schedule: one step per `:interval`
  milliseconds, each interval shortened or stretched at random by up to
  `:jitter`. Every kind's actors are counted apart (`by_kind/1`), and each
  kind's entities carry a kind code of their own (3 for the first kind
  of `:kinds`, 3 for the next, ...), by which players' clients draw them
  with the kind's emoji. Actors are hosted `:per_herd` to a process (a
  herd, see `docs/decisions.md`), started without blocking anything: the
  supervisor returns at once and the herds join their actors in the
  background, so the world answers throughout.

  ## Overload

  Actors shed their own work rather than queue it when the world falls
  behind (a machine short of CPU, more actors than it can move): an actor
  whose previous move has no outcome yet skips its next one, a herd never
  has more than `:max_in_flight` moves unanswered (and halves what it lets
  be in flight while answers take longer than `:target_ms`), and a herd
  that gets to a move more than `:late_ms` after it was due skips it
  instead of catching up. Skipped moves are counted by reason (`skipped/1`, and the
  `grove_actor_moves_skipped_total` metric). So what the actors have in
  the world's mailboxes, and the round trip of everyone's moves, stay
  bounded; see `docs/decisions.md` ("Actors shed moves, not queue them").

  Joins are paced: at most `:join_concurrency` herds join at once (a chunk
  of joins each), and a join refused `:busy` or timed out is tried again
  after a backoff (counted as retried, not failed).

  With uniform spawn every zone gets its share of the actors, and each herd
  starts its actors in one block of neighbouring zones (as many zones as it
  takes to fill it), so the moves a herd sends at once go to few zones and
  travel several to a message. The herds a group starts with walk their
  block's actors of every kind, each actor stepping by its own kind
  (`add_kinds/3`; `add/3` starts herds of one kind): a zone gets one batch
  of a slot's moves from its block's herd, where a herd per kind, each
  covering the world in blocks of its own, sent one each (four times the
  messages in `make run`'s world of four kinds; see `docs/decisions.md`). A herd per zone would send one message per
  zone just as well, but with a few moves in each: at 20,000 actors on
  400 zones that is a wake-up of the herd, of the zone and of the herd
  again for every five moves.

  ## A cluster

  In a cluster (`:cluster` names the instance whose members share the
  actors), the counts of `:kinds` are the cluster's totals: each member
  runs its share of every kind, computed alike on every node from the
  sorted member list (`Grove.Actors.Share`), so that the shares of the
  live members always add up to the configured total. When the members
  change (and then stay unchanged for `:settle` ms), the node starts the
  actors it now owes (those of a lost node start again on the survivors)
  or retires the ones it no longer owes: they leave the world one by one,
  each leave answered, paced as joins are. `by_kind/1` says each kind's share here
  (`:share`) and total (`:total`). Alone, a node runs every actor it is
  configured with, as ever.

  ## Options

    * `:name` - name of this group of actors (required)
    * `:world` - the world to walk in (required)
    * `:cluster` - the instance whose cluster shares these actors among
      its members, or `nil` to run them all here (default `nil`;
      `Grove.Config` sets it for a cluster of several nodes)
    * `:settle` - milliseconds a cluster's members must stay unchanged
      before this node starts or retires actors for them, so that nodes
      starting together do not each start every actor first (default
      `2000`)
    * `:kinds` - the kinds to run and how many of each, in a list of
      `{module, count}` or `{module, count, options}`, where the options
      go to the kind's `init/2` (default `[{Grove.Actors.Walker, count}]`)
    * `:count` - random walkers to start with, when `:kinds` is not given
      (default `0`)
    * `:interval` - milliseconds between an actor's moves (default `1000`)
    * `:jitter` - fraction of the interval by which each wait varies (default `0.2`)
    * `:spawn` - `:uniform` for random free cells all over the world, or
      `{:blob, {x, y}, spread}` to start them around a point, about `spread`
      cells from it: an actor whose drawn cell is taken gets a free cell in
      a square around the point that doubles its side until it has one, so
      the blob grows outward as it fills and every actor is placed while
      the world has room (one that is not is logged with the reason and
      counted in the status line). Environment: `GROVE_SPAWN=blob:X,Y,SPREAD`
      or `GROVE_SPAWN=uniform` (default `:uniform`)
    * `:per_herd` - actors per process at most (default `2000`: a herd
      walks a block of about 6 x 6 zones on the default world, and fewer,
      larger herds wake fewer times for the same moves)
    * `:resolution` - milliseconds of a herd's schedule slots; moves due in
      the same slot go out together (default half the `:interval`, at most
      `500`: a zone gets a herd's moves in two messages a second at the
      default interval instead of five, each carrying more moves, since most
      of what a move costs is the messages and wake-ups around it; see
      `docs/decisions.md`). Each actor moves once per `:interval` on
      average, exactly so when the interval is a multiple of the slot
    * `:batch` - send a slot's moves with `move_many/2`, one message per zone,
      rather than one `move/4` each (default `true`)
    * `:resident` - actors that live in their zones: each joins with its
      walk (`Grove.World.join/2`'s `:walk`) and its zone steps it on the
      world's beats (`:resident_beat`, `:resident_phases`) through the same
      move rules, handoff and actions as a client's, with no message per
      move; the herd only joins, keeps and retires them. A kind that
      senses resides in a world that makes senses (`Grove.World`'s
      `:senses`, which an instance gives its world): its zone reads them
      as the herd would; elsewhere its herd walks it (default `false`)
    * `:unseen_every` - where nobody watches (no viewer's viewport
      overlaps the actor's zone), an actor takes one turn in this many on
      average and lets the others pass, counted as rested: nothing is
      sensed, decided or sent. Each turn asks again, so an actor where
      someone watches steps as before, from its first turn after they come.
      A world of several nodes never rests its actors (its zones may be
      watched from another node). `1` rests none (default `1`; `make run`'s
      world rests three turns in four, see `docs/decisions.md`).
      Environment: `GROVE_UNSEEN_EVERY`
    * `:max_in_flight` - moves a herd may have unanswered at once; more are
      skipped (default twice the moves a herd sends in one slot, which the
      world answers long before the next slot while it keeps up)
    * `:target_ms` - the round trip the herds aim to keep: a herd halves
      the moves it lets be in flight when an answer takes longer, and
      grows them back, up to `:max_in_flight`, while answers come sooner
      (default `100`)
    * `:late_ms` - a move its herd gets to more than this many milliseconds
      after it was due is skipped (default half the `:interval`)
    * `:move_timeout` - milliseconds after which a move with no outcome is
      forgotten, so its actor moves again (default `5000`)
    * `:join_concurrency` - herds joining at once, each a chunk of joins
      one after the other (default 128 per scheduler: a join spends its
      time waiting for its zone, so on a busy machine the joins go as fast
      as there are of them at once; a few per zone at most is no storm)
    * `:join_timeout` - milliseconds a join waits for its zone before it is
      tried again later (default `2000`)
    * `:join_backoff` - `{first_ms, max_ms}`: how long a herd whose join was
      refused waits before it joins again, doubling from the first to the
      most while refusals go on, with jitter (default `{50, 5000}`)
    * `:herd_process` - the options each herd's process starts with
      (`:erlang.spawn_opt/2`'s `:min_heap_size`, `:min_bin_vheap_size`,
      `:fullsweep_after`, `:message_queue_data`; default `[]`, the VM's;
      see `docs/benchmarks.md`, "250,000 actors: the zones' and herds'
      heaps")
    * `:herd_priority` - the priority each herd's process runs at, `:low`
      or `:normal` (default `:low`): the zones, and whatever else of the
      node runs at normal priority (players' sessions), go first when they
      have work, and the herds take the time left, so that a zone answers
      a batch before more batches come to it. `:normal` runs the herds
      among the zones, as before; `:high` is refused, since herds above
      the zones would starve the node. See `docs/decisions.md`, "Herds
      run at low priority"
    * `:api` - the module implementing `Grove.World.Client` (default `Grove.World`)

  ## Examples

      {:ok, _} = Grove.Actors.start_link(name: MyActors, world: MyWorld, count: 1000)
      Grove.Actors.add(MyActors, 500, spawn: {:blob, {500, 500}, 5})

      Grove.Actors.start_link(
        name: MoreActors,
        world: MyWorld,
        kinds: [{Grove.Actors.Walker, 15_000}, {Grove.Actors.Wanderer, 3_000}, {Grove.Actors.Sheep, 2_000}]
      )
  """

  use Supervisor

  alias Grove.Actor
  alias Grove.Actors.{Balancer, Herd, Stats}

  @partitions 64
  # Past this many zones, uniform spawn spreads herds over single zones.
  @planned_zones 100_000
  alias Grove.World.{Grid, Terrain}

  @defaults [
    name: nil,
    world: nil,
    cluster: nil,
    settle: 2000,
    count: 0,
    kinds: nil,
    interval: 1000,
    jitter: 0.2,
    spawn: :uniform,
    per_herd: 2000,
    resolution: nil,
    batch: true,
    resident: false,
    unseen_every: 1,
    max_in_flight: nil,
    target_ms: 100,
    late_ms: nil,
    move_timeout: 5000,
    join_concurrency: nil,
    join_timeout: 2000,
    join_backoff: {50, 5000},
    herd_process: [],
    herd_priority: :low,
    api: Grove.World
  ]

  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts) do
    opts = validate!(opts)
    Supervisor.start_link(__MODULE__, opts, name: opts[:name])
  end

  @doc false
  def child_spec(opts) do
    %{
      id: Keyword.get(opts, :name, __MODULE__),
      start: {__MODULE__, :start_link, [opts]},
      type: :supervisor
    }
  end

  @impl true
  def init(opts) do
    name = opts[:name]
    kinds = opts[:kinds]
    # Each kind's share on this node: all of it alone, set by the balancer in a cluster.
    shares = :atomics.new(length(kinds), signed: false)
    for kind <- kinds, opts[:cluster] == nil, do: :atomics.put(shares, kind.index + 1, kind.count)

    # Under the term's lock like every change: one under way as the group
    # restarts ends first, and cannot put back the term it read over this.
    held = %{stats: Stats.new(length(kinds)), opts: opts, shares: shares, phases: new_phases()}
    update_held(name, fn _before -> {:ok, held} end)

    populate =
      if opts[:cluster] do
        # Starts and retires this node's share as the members change.
        {Balancer, name: name, instance: opts[:cluster], kinds: kinds, settle: opts[:settle]}
      else
        # Populates the world after the tree is up, so start-up never waits
        # on it: herds that each walk an area's actors of every kind.
        Supervisor.child_spec(
          {Task, fn -> add_kinds(name, for(kind <- kinds, do: {kind.module, kind.count})) end},
          restart: :temporary
        )
      end

    children = [
      # Join permits, shared by the herds: joins never come all at once.
      {Grove.Permits,
       name: join_permits(name),
       concurrency: opts[:join_concurrency] || 128 * System.schedulers_online(),
       queue: 64},
      # Herds are independent: one that crashes is restarted and joins its
      # actors afresh. They are spread over partitions because a single
      # DynamicSupervisor takes time quadratic in its children to shut down,
      # which shows with a process per actor.
      {PartitionSupervisor,
       child_spec: {DynamicSupervisor, strategy: :one_for_one, max_restarts: 100},
       name: herds(name),
       partitions: @partitions},
      populate
    ]

    Supervisor.init(children, strategy: :one_for_all)
  end

  @doc """
  Starts `count` more actors of one of the group's kinds: `:kind`, a
  module of its `:kinds` (default the first). Other options override
  those the group started with (`:interval`, `:jitter`, `:spawn`,
  `:per_herd`). Returns the herds started.
  """
  @spec add(atom(), non_neg_integer(), keyword()) :: [pid()]
  def add(name, count, overrides \\ []),
    do: name |> add_herds(count, overrides) |> Enum.map(&elem(&1, 0))

  @doc false
  # `add/3`, with each herd's size.
  @spec add_herds(atom(), non_neg_integer(), keyword()) :: [{pid(), pos_integer()}]
  def add_herds(name, count, overrides \\ []) do
    {module, overrides} = Keyword.pop(overrides, :kind)
    {opts, [kind]} = kinds_and_opts(name, [{module, count}], overrides)
    start_herds(name, opts, [{kind, count}])
  end

  @doc """
  Starts more actors of several of the group's kinds at once,
  `[{module, count}]`, in herds that each walk an area's actors of every
  kind: a zone then gets one batch of a slot's moves from the herd of its
  area, where herds of one kind each sent their own. Other options as for
  `add/3`. Returns the herds started.
  """
  @spec add_kinds(atom(), [{module(), non_neg_integer()}], keyword()) :: [pid()]
  def add_kinds(name, counts, overrides \\ []) do
    {opts, kinds} = kinds_and_opts(name, counts, overrides)

    name
    |> start_herds(opts, Enum.zip(kinds, Enum.map(counts, &elem(&1, 1))))
    |> Enum.map(&elem(&1, 0))
  end

  # The group's options with `overrides`, and the kind of each module of
  # `counts` (nil: the first kind).
  defp kinds_and_opts(name, counts, overrides) do
    %{opts: opts} = :persistent_term.get({__MODULE__, name})
    opts = validate!(Keyword.merge(opts, Keyword.put(overrides, :name, name)))

    kinds =
      for {module, _count} <- counts do
        case module do
          nil ->
            hd(opts[:kinds])

          module ->
            Enum.find(opts[:kinds], &(&1.module == module)) ||
              raise ArgumentError,
                    "#{inspect(module)} is not one of the kinds of #{inspect(name)}: " <>
                      inspect(Enum.map(opts[:kinds], & &1.module))
        end
      end

    {opts, kinds}
  end

  # Herds for `counts` (`[{kind, count}]`), each walking its area's share of
  # every kind.
  defp start_herds(name, opts, counts) do
    %{stats: stats} = :persistent_term.get({__MODULE__, name})
    {offset, started} = phases(name)
    # Where in a slot each herd's turns fall, a fraction of it: evenly
    # spread, herd after herd a golden section of the slot on from the one
    # before, from the group's point, numbered across every call that adds
    # herds (the balancer's too), so herds added later go on the sequence
    # where those before left it. However many herds, no two are closer
    # than about a third of the slot's share of each.
    plan = herd_plan(opts, counts)
    first = :atomics.add_get(started, 1, length(plan)) - length(plan)

    for {{area, parts}, n} <- Enum.with_index(plan) do
      kinds =
        for {kind, size} <- parts do
          %{
            module: kind.module,
            kind: kind.code,
            kind_options: kind.options,
            stats: Stats.for_kind(stats, kind.index),
            count: size
          }
        end

      herd_opts = [
        world: opts[:world],
        api: opts[:api],
        kinds: kinds,
        area: area,
        phase: phase(offset, first + n),
        interval: opts[:interval],
        jitter: opts[:jitter],
        spawn: opts[:spawn],
        resolution: opts[:resolution],
        batch: opts[:batch],
        resident: opts[:resident],
        unseen_every: opts[:unseen_every],
        max_in_flight: opts[:max_in_flight],
        target_ms: opts[:target_ms],
        late_ms: opts[:late_ms],
        move_timeout: opts[:move_timeout],
        join_timeout: opts[:join_timeout],
        join_backoff: opts[:join_backoff],
        join_permits: join_permits(name),
        spawn_opt: opts[:herd_process],
        priority: opts[:herd_priority]
      ]

      # A herd that retired all its actors stops normally, and stays stopped.
      {:ok, pid} =
        DynamicSupervisor.start_child({:via, PartitionSupervisor, {herds(name), n}}, %{
          id: Herd,
          start: {Herd, :start_link, [herd_opts]},
          restart: :transient
        })

      {pid, parts |> Enum.map(&elem(&1, 1)) |> Enum.sum()}
    end
  end

  # The `n`th herd's place in a slot, from 0 to 1: the golden ratio's
  # multiples fill an interval most evenly of any sequence, each new one
  # in the largest gap left.
  @golden (:math.sqrt(5) - 1) / 2
  defp phase(offset, n) do
    at = offset + n * @golden
    at - Float.floor(at)
  end

  # Where in a slot the group's herds take their turns: a point drawn
  # once, and the count of herds started so far (`start_herds/3`).
  defp new_phases, do: {:rand.uniform(), :atomics.new(1, signed: false)}

  # The group's phases. A group started by code that held none (its term
  # has no `:phases`) would crash at its next `add/3`: it gets them then,
  # once, however many adds come at the same moment, from a point drawn
  # then; the herds it started before stay where they were put.
  defp phases(name) do
    case :persistent_term.get({__MODULE__, name}) do
      %{phases: phases} ->
        phases

      _older ->
        update_held(name, fn
          %{phases: phases} = held ->
            {phases, held}

          held ->
            phases = new_phases()
            {phases, Map.put(held, :phases, phases)}
        end)
    end
  end

  # The group's held term is written one change at a time, its start's
  # too: two at once would each put back the term as it read it, and one's
  # change would be lost. Each change is made by a process of its own
  # that holds the name `:"<group>.held"` while it writes: the node's name
  # table is the lock, with no server in between (`:global`'s is busy
  # while nodes join), and a writer that finds the name taken waits for
  # its holder to end. `fun` gets the term (nil before the group's first
  # start) and gives what to return and the term.
  defp update_held(name, fun) do
    caller = self()
    {writer, monitor} = spawn_monitor(fn -> write_held(name, fun, caller) end)

    receive do
      {^writer, reply} ->
        Process.demonitor(monitor, [:flush])

        case reply do
          {:ok, result} -> result
          {:raised, kind, reason, stacktrace} -> :erlang.raise(kind, reason, stacktrace)
        end

      {:DOWN, ^monitor, :process, ^writer, reason} ->
        exit(reason)
    end
  end

  defp write_held(name, fun, caller) do
    lock = :"#{name}.held"

    if register(lock) do
      reply =
        try do
          {result, held} = fun.(:persistent_term.get({__MODULE__, name}, nil))
          :persistent_term.put({__MODULE__, name}, held)
          {:ok, result}
        catch
          kind, reason -> {:raised, kind, reason, __STACKTRACE__}
        end

      send(caller, {self(), reply})
    else
      await_end(Process.whereis(lock))
      write_held(name, fun, caller)
    end
  end

  defp register(lock) do
    Process.register(self(), lock)
  rescue
    ArgumentError -> false
  end

  defp await_end(nil), do: :ok

  defp await_end(holder) do
    monitor = Process.monitor(holder)

    receive do
      {:DOWN, ^monitor, :process, ^holder, _reason} -> :ok
    end
  end

  # Herds with their home areas, each with its share of every kind
  # (`{area, [{kind, count}]}`). Uniform spawn gives every block of zones a
  # share of each kind in proportion to its walkable cells (forest and lake
  # hold fewer), split into herds of at most `per_herd`; a block is as many
  # zones on a side as fill a herd on average. A blob has no areas, only
  # sizes.
  defp herd_plan(opts, counts) do
    per_herd = opts[:per_herd]
    count = counts |> Enum.map(&elem(&1, 1)) |> Enum.sum()

    case opts[:spawn] do
      :uniform ->
        grid = opts[:api].grid(opts[:world])
        terrain = opts[:api].terrain(opts[:world])

        areas =
          if Grid.zone_count(grid) > @planned_zones,
            do: spread_areas(grid, terrain, div(count + per_herd - 1, per_herd)),
            else: block_areas(grid, terrain, count, per_herd)

        # Each kind apportioned over the areas alike, then each area's
        # share dealt into its herds.
        quotas =
          for {kind, kind_count} <- counts,
              {area, quota} <- apportion(areas, kind_count),
              quota > 0,
              reduce: %{} do
            acc -> Map.update(acc, area, [{kind, quota}], &[{kind, quota} | &1])
          end

        for area <- areas |> Enum.map(&elem(&1, 0)) |> Enum.uniq(),
            shares = Enum.reverse(Map.get(quotas, area, [])),
            shares != [],
            parts <-
              deal(shares, split(shares |> Enum.map(&elem(&1, 1)) |> Enum.sum(), per_herd)),
            do: {area, parts}

      {:blob, _center, _spread} ->
        for parts <- deal(Enum.filter(counts, &(elem(&1, 1) > 0)), split(count, per_herd)),
            do: {nil, parts}
    end
  end

  # `shares` (`[{kind, count}]`) dealt in order into herds of `sizes`: each
  # herd's `[{kind, count}]`.
  defp deal(_shares, []), do: []

  defp deal(shares, [size | sizes]) do
    {parts, rest} = take_parts(shares, size, [])
    [parts | deal(rest, sizes)]
  end

  defp take_parts(shares, 0, parts), do: {Enum.reverse(parts), shares}
  defp take_parts([], _size, parts), do: {Enum.reverse(parts), []}

  defp take_parts([{kind, count} | rest], size, parts) when count <= size,
    do: take_parts(rest, size - count, [{kind, count} | parts])

  defp take_parts([{kind, count} | rest], size, parts),
    do: {Enum.reverse([{kind, size} | parts]), [{kind, count - size} | rest]}

  # Every block of zones, weighed by its walkable cells.
  defp block_areas(grid, terrain, count, per_herd) do
    per_zone = max(div(count, Grid.zone_count(grid)), 1)
    side = max(trunc(:math.sqrt(per_herd / per_zone)), 1)

    for row <- 0..(grid.zones_y - 1)//side, col <- 0..(grid.zones_x - 1)//side do
      {x0, y0, _, _} = Grid.zone_bounds(grid, row * grid.zones_x + col)
      last_row = min(row + side, grid.zones_y) - 1
      last_col = min(col + side, grid.zones_x) - 1
      {_, _, x1, y1} = Grid.zone_bounds(grid, last_row * grid.zones_x + last_col)
      {{x0, y0, x1, y1}, Terrain.walkable_count(terrain, x0, y0, x1, y1)}
    end
  end

  # A world of more zones than could all run is too large to weigh block
  # by block (its ground is made per zone, as zones wake): its herds go to
  # zones spread evenly over it, at least one zone per herd, each weighed
  # by its own walkable cells.
  defp spread_areas(grid, terrain, herds) do
    side = max(ceil(:math.sqrt(herds)), 1)

    for row <- 0..(side - 1), col <- 0..(side - 1) do
      zone_row = div((2 * row + 1) * grid.zones_y, 2 * side)
      zone_col = div((2 * col + 1) * grid.zones_x, 2 * side)
      {x0, y0, x1, y1} = Grid.zone_bounds(grid, zone_row * grid.zones_x + zone_col)
      {{x0, y0, x1, y1}, Terrain.walkable_count(terrain, x0, y0, x1, y1)}
    end
  end

  # Shares `count` among weighted items by largest remainder, so the shares
  # add up to `count` exactly.
  defp apportion(weighted, count) do
    total = weighted |> Enum.map(&elem(&1, 1)) |> Enum.sum() |> max(1)

    exact =
      for {item, weight} <- weighted do
        share = count * weight / total
        {item, trunc(share), share - trunc(share)}
      end

    left = count - Enum.reduce(exact, 0, fn {_, whole, _}, acc -> acc + whole end)

    bonus =
      exact |> Enum.sort_by(&elem(&1, 2), :desc) |> Enum.take(left) |> MapSet.new(&elem(&1, 0))

    for {item, whole, _} <- exact,
        do: {item, whole + if(MapSet.member?(bonus, item), do: 1, else: 0)}
  end

  # `total` in at most `per_part`-sized parts of nearly equal size.
  defp split(0, _per_part), do: []

  defp split(total, per_part) do
    parts = div(total + per_part - 1, per_part)
    for i <- 0..(parts - 1), do: div(total, parts) + if(i < rem(total, parts), do: 1, else: 0)
  end

  @doc """
  Holds every herd of a group (`:sys.suspend/1`): until `release/1`, none
  steps an actor or joins one, so code loaded meanwhile runs on no state
  before `renew/3` has brought it along. Returns the herds held (a herd
  that stopped meanwhile is not).
  """
  @spec hold(atom()) :: [pid()]
  def hold(name) do
    for herd <- herds_of(name), sys(fn -> :sys.suspend(herd, :infinity) end) == :ok, do: herd
  end

  @doc "Lets herds held by `hold/1` go on."
  @spec release([pid()]) :: :ok
  def release(herds) do
    for herd <- herds, do: sys(fn -> :sys.resume(herd, :infinity) end)
    :ok
  end

  @doc """
  A kind's module was reloaded (`Grove.Reloader`): its description (what
  it senses, its name and emoji) is made again, kept for readers, and
  given to its herds, held by `hold/1`, which pass every actor's state
  through its `upgrade/2` when its version changed (`:sys.change_code/4`,
  as OTP's release handling does it).
  """
  @spec renew(atom(), module(), [pid()]) :: :ok
  def renew(name, module, herds) do
    description = Actor.describe!(module)

    update_held(name, fn %{opts: opts} = held ->
      kinds =
        for kind <- opts[:kinds] do
          if kind.module == module, do: Map.merge(kind, description), else: kind
        end

      {:ok, %{held | opts: Keyword.put(opts, :kinds, kinds)}}
    end)

    extra = {:grove_renew, module, description}
    for herd <- herds, do: sys(fn -> :sys.change_code(herd, Herd, nil, extra, :infinity) end)
    :ok
  end

  # A herd may stop at any time (retired, or crashed): one that did is
  # not held, renewed or released.
  defp sys(call) do
    call.()
  catch
    :exit, _gone -> :gone
  end

  @doc "The herd processes of a group."
  @spec herds_of(atom()) :: [pid()]
  def herds_of(name) do
    for {_, partition, _, _} <- PartitionSupervisor.which_children(herds(name)),
        {_, pid, _, _} <- DynamicSupervisor.which_children(partition),
        is_pid(pid),
        do: pid
  end

  @doc """
  The group's kinds, in the order of `:kinds`: each with its module, name,
  emoji, kind code, how many the group started with, its options and what
  it senses.
  """
  @spec kinds(atom()) :: [map()]
  def kinds(name), do: :persistent_term.get({__MODULE__, name}).opts[:kinds]

  @doc """
  Each kind with what its actors did so far (`Grove.Actors.Stats` counts:
  `:sent`, `:ok` and every rejection, `:stayed`, `:skipped_*`, ...) and
  how many of its actors are in the world now (`nil` when the world
  cannot say: its `:api` has no `kind_counts/1`), how many of them this
  node owes (`:share`: its share in a cluster, all of them alone) and
  how many the group is configured with (`:total`).
  """
  @spec by_kind(atom()) :: [map()]
  def by_kind(name) do
    %{stats: stats, opts: opts, shares: shares} = :persistent_term.get({__MODULE__, name})
    api = opts[:api]

    present =
      if Code.ensure_loaded?(api) and function_exported?(api, :kind_counts, 1),
        do: api.kind_counts(opts[:world])

    for kind <- opts[:kinds] do
      Map.merge(Map.take(kind, [:module, :name, :emoji, :code]), %{
        counts: Stats.read_kind(stats, kind.index),
        actors: if(present, do: Map.get(present, kind.code, 0)),
        share: :atomics.get(shares, kind.index + 1),
        total: kind.count
      })
    end
  end

  @doc "Client-side counters and the move round-trip histogram; see `Grove.Actors.Stats`."
  @spec stats(atom()) :: Stats.t()
  def stats(name), do: :persistent_term.get({__MODULE__, name}).stats

  @doc "Moves the actors skipped since start, by reason (see the module doc)."
  @spec skipped(atom()) :: %{atom() => non_neg_integer()}
  def skipped(name) do
    counts = Stats.read(stats(name)).counts
    Map.new(Stats.skip_reasons(), &{&1, counts[:"skipped_#{&1}"]})
  end

  @doc "How many actors have joined so far (minus those that failed to)."
  @spec joined(atom()) :: non_neg_integer()
  def joined(name), do: Stats.read(stats(name)).counts.joined

  @doc "How many of this node's actors are in the world: joined, less those retired since."
  @spec running(atom()) :: integer()
  def running(name) do
    counts = Stats.read(stats(name)).counts
    counts.joined - counts.left
  end

  @doc false
  # The balancer records each kind's share here.
  @spec put_share(atom(), non_neg_integer(), non_neg_integer()) :: :ok
  def put_share(name, kind_index, share),
    do: :atomics.put(:persistent_term.get({__MODULE__, name}).shares, kind_index + 1, share)

  @doc "Stops every herd from sending moves; outcomes in flight are still counted."
  @spec pause(atom()) :: :ok
  def pause(name) do
    Enum.each(herds_of(name), &Herd.pause/1)
  end

  defp herds(name), do: :"#{name}.herds"
  defp join_permits(name), do: :"#{name}.join_permits"

  @doc """
  The herds' slot when `:resolution` is not given: half the interval, at
  most 500 ms, so that the interval is a multiple of it (each actor then
  moves once per interval on average, exactly) up to a second.

      iex> Grove.Actors.default_resolution(1000)
      500
      iex> Grove.Actors.default_resolution(100)
      50
  """
  @spec default_resolution(pos_integer()) :: pos_integer()
  def default_resolution(interval), do: interval |> div(2) |> min(500) |> max(1)

  defp validate!(opts) do
    opts = Keyword.validate!(opts, @defaults)

    opts =
      case {opts[:resolution], opts[:interval]} do
        {nil, interval} when is_integer(interval) and interval > 0 ->
          Keyword.put(opts, :resolution, default_resolution(interval))

        _given_or_invalid ->
          opts
      end

    unless is_atom(opts[:name]) and opts[:name] != nil,
      do: raise(ArgumentError, "actors need a :name atom, got: #{inspect(opts[:name])}")

    if opts[:world] == nil, do: raise(ArgumentError, "actors need a :world")

    unless is_atom(opts[:cluster]),
      do:
        raise(
          ArgumentError,
          ":cluster must be an instance's name or nil, got: #{inspect(opts[:cluster])}"
        )

    for key <-
          [:interval, :per_herd, :resolution, :move_timeout, :join_timeout, :target_ms] ++
            [:settle, :unseen_every],
        not (is_integer(opts[key]) and opts[key] > 0) do
      raise ArgumentError,
            "#{inspect(key)} must be a positive integer, got: #{inspect(opts[key])}"
    end

    unless is_boolean(opts[:resident]),
      do:
        raise(ArgumentError, ":resident must be true or false, got: #{inspect(opts[:resident])}")

    for key <- [:max_in_flight, :late_ms, :join_concurrency],
        not (opts[key] == nil or (is_integer(opts[key]) and opts[key] > 0)) do
      raise ArgumentError,
            "#{inspect(key)} must be a positive integer or nil, got: #{inspect(opts[key])}"
    end

    Grove.SpawnOptions.validate!(:herd_process, opts[:herd_process])

    unless opts[:herd_priority] in [:low, :normal],
      do:
        raise(
          ArgumentError,
          ":herd_priority must be :low or :normal, got: #{inspect(opts[:herd_priority])}"
        )

    case opts[:join_backoff] do
      {first, most} when is_integer(first) and first > 0 and is_integer(most) and most >= first ->
        :ok

      other ->
        raise ArgumentError,
              ":join_backoff must be {first_ms, max_ms} with 0 < first <= max, got: #{inspect(other)}"
    end

    unless is_integer(opts[:count]) and opts[:count] >= 0,
      do:
        raise(
          ArgumentError,
          ":count must be a non-negative integer, got: #{inspect(opts[:count])}"
        )

    unless is_number(opts[:jitter]) and opts[:jitter] >= 0 and opts[:jitter] < 1,
      do: raise(ArgumentError, ":jitter must be a number in 0..1, got: #{inspect(opts[:jitter])}")

    # The walkers of `:count` become a kind like any other.
    opts = Keyword.merge(opts, kinds: validate_kinds!(opts[:kinds], opts[:count]), count: 0)

    case opts[:spawn] do
      :uniform ->
        :ok

      {:blob, {x, y}, spread} when is_integer(x) and is_integer(y) and is_number(spread) ->
        :ok

      other ->
        raise ArgumentError,
              ":spawn must be :uniform or {:blob, {x, y}, spread}, got: #{inspect(other)}"
    end

    opts
  end

  # Kinds, validated once into descriptions with their kind codes.
  # Descriptions pass through unchanged (`add/3` validates again).
  defp validate_kinds!(nil, count), do: validate_kinds!([{Grove.Actors.Walker, count}], 0)

  defp validate_kinds!(kinds, count) when is_list(kinds) and kinds != [] do
    if count != 0,
      do: raise(ArgumentError, "give actors a :count or :kinds (with a count each), not both")

    if length(kinds) > 254,
      do: raise(ArgumentError, "at most 254 actor kinds, got: #{length(kinds)}")

    kinds =
      for {entry, index} <- Enum.with_index(kinds) do
        case entry do
          %{module: _, code: _} = described ->
            described

          {module, n} ->
            describe_kind!(module, n, [], index)

          {module, n, options} ->
            describe_kind!(module, n, options, index)

          other ->
            raise ArgumentError,
                  "each of :kinds must be {module, count} or {module, count, options}, got: #{inspect(other)}"
        end
      end

    case kinds |> Enum.frequencies_by(& &1.module) |> Enum.find(fn {_, n} -> n > 1 end) do
      nil -> kinds
      {module, _} -> raise ArgumentError, ":kinds lists #{inspect(module)} more than once"
    end
  end

  defp validate_kinds!(other, _count),
    do:
      raise(
        ArgumentError,
        ":kinds must be a non-empty list of {module, count} or {module, count, options}, got: #{inspect(other)}"
      )

  defp describe_kind!(module, count, options, index) do
    unless is_integer(count) and count >= 0,
      do:
        raise(
          ArgumentError,
          "the count of #{inspect(module)} in :kinds must be a non-negative integer, got: #{inspect(count)}"
        )

    unless Keyword.keyword?(options),
      do:
        raise(
          ArgumentError,
          "the options of #{inspect(module)} in :kinds must be a keyword list, got: #{inspect(options)}"
        )

    description = Actor.describe!(module)

    # The kind checks its options now rather than in every herd later.
    try do
      module.init(options, 0)
    rescue
      error ->
        raise ArgumentError,
              "#{inspect(module)} refused its options #{inspect(options)}: #{Exception.message(error)}"
    end

    Map.merge(description, %{index: index, code: index + 3, count: count, options: options})
  end
end
