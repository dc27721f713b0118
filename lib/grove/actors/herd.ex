defmodule Grove.Actors.Herd do
  @moduledoc false
  # One process that walks many actors, of one kind or of several (each a
  # `Grove.Actor`). Each actor is an entity of its own, joined and moved
  # through the public client API with its own schedule; the herd only
  # shares the process, the timer and the mailbox between them, and asks
  # the actor's kind where it steps when its turn comes.
  #
  # A herd of several kinds (`:kinds`) walks an area's actors of every
  # kind, so that a zone gets one batch of a slot's moves from it where a
  # herd per kind sent one each: each kind keeps its module, senses,
  # options and counts (`Grove.Actors.Stats`, a row each), and the slot's
  # turns are taken kind by kind, then sent together. Every tag a herd
  # gives a move carries its kind's index in its low byte (`tag/2`): the
  # time the batch was sent, to a quarter of a microsecond, and which
  # kind's counts an outcome goes to, with nothing kept per actor; an
  # actor's entry on the wheel keeps its last move's tag, and a new
  # actor's is its kind's index alone (a tag of time 0: no move yet).
  #
  # The kind decides, the herd does the I/O: for a kind that senses, the
  # herd reads the actor's cell and, if asked, its neighbours from the
  # zones' ETS tables (never a message) and hands them over as
  # `Grove.Actor.Senses`; for one that senses nothing it reads nothing. The
  # random integer a step gets comes from the draw the herd makes for the
  # schedule anyway. A step that answers `:stay` sends nothing and is
  # counted as `:stayed`.
  #
  # Why not one process per actor: a move then costs two wake-ups of a cold
  # process (its timer, then its outcome), and at hundreds of thousands of
  # actors that, not the world, is what the machine spends its time on. See
  # docs/decisions.md for the measurement.
  #
  # Schedules live on a timing wheel (`Herd.Wheel`) of `resolution` ms
  # slots keyed by absolute slot number; the herd's single timer fires at
  # the next slot that has someone due, offset by a phase of its own so
  # that herds do not all fire at once (a group's herds spread their
  # phases evenly over a slot, `Grove.Actors`: drawn at random, some
  # would fire together and pile their batches on the schedulers at
  # once, while the slot's other moments go idle). The moves due in a
  # slot go out together with `move_many/2` (one message per zone),
  # unless `batch: false`. The tag of
  # every move is the time it was sent, so the outcome alone gives the round
  # trip.
  #
  # Overload: a herd sheds moves rather than queue them. It counts the
  # unanswered moves of each batch it sent (`pending`, keyed by the time
  # the batch went out, which is every move's tag, and each actor on the
  # wheel remembers the batch of its last move) and skips an actor's move,
  # counted by reason in `Grove.Actors.Stats`, when
  #
  #   * its previous move may have no outcome yet: its batch is not fully
  #     answered (`:unanswered`; cheaper than a map entry per move, and
  #     only ever cautious);
  #   * the herd already has as many moves unanswered as its window allows
  #     (`:full`): at most `max_in_flight`, halved while answers take longer
  #     than `target_ms`, grown back while they do not;
  #   * the herd got to it more than `late_ms` after it was due (`:late`):
  #     a herd that was not scheduled for a while does not catch up, it
  #     spreads the late actors over their next interval.
  #
  # So the moves a herd has in the world's mailboxes are bounded, whatever
  # the world's speed, and so are the outcomes in its own; and the herds
  # together keep in flight about what the world answers within the
  # target (`Herd.Window`). A batch with moves unanswered after `move_timeout` is forgotten
  # (its moves counted `:expired`), so an outcome lost with a crashed zone
  # cannot keep its actors still for ever.
  #
  # Joining happens in chunks between the herd's other work, each under a
  # permit of the group's `Grove.Permits` (bounded concurrency across all
  # herds). A join refused `:busy` or timed out is tried again later, after
  # a backoff that doubles up to a bound; it is not a failure.
  #
  # Retiring (`retire/2`, when a cluster's members change and this node
  # owes fewer actors): actors not joined yet are simply not joined; the
  # others come off the wheel and leave the world one by one through the
  # client API, paced as joins are (chunks under the same permits, a leave
  # refused `:busy` or timed out tried again after the same backoff). A
  # herd left with no actors stops, normally.

  use GenServer

  import Bitwise

  alias Grove.Actor.Senses
  alias Grove.Actors.Herd.{Wheel, Window}
  alias Grove.Actors.Stats
  alias Grove.World.Grid

  require Logger
  require Record

  # A slot's turns' constants (`move_due/4`), read at every turn: the herd,
  # its wheel, the batches whose moves are not all answered (`pending`)
  # and how many may be (`size`), the slot walked and the earliest an
  # actor comes back (`first`: the slot after the one walked now); the
  # width of the draws (`draws`: the next wait, in ms, is drawn from an
  # interval of this width that starts `jitter_ms` before `interval`, a
  # slot's width more, so that rounding down to a slot keeps the average at
  # `interval`; one draw gives both the step's random integer and the next
  # wait); the kind whose run it is, its index and the tag of its moves
  # (set for each run, `runs/4`); where nobody watches, how often an actor
  # takes its turn (`every`), and the world read once for the batch's
  # questions of where each actor is (`where`).
  Record.defrecordp(:turn, [
    :herd,
    :wheel,
    :pending,
    :size,
    :slot,
    :first,
    :draws,
    :interval,
    :jitter_ms,
    :kind,
    :tag,
    :every,
    :where,
    index: 0
  ])

  # The tags a zone gives a resident's step or action (`Grove.World.Zone`).
  defguardp is_walk(tag)
            when tag == :walk or
                   (is_tuple(tag) and tuple_size(tag) == 3 and
                      elem(tag, 0) == Grove.World.Zone and elem(tag, 1) == :walk)

  # Tries of a join that fails for its cell (occupied, blocked) before it counts as failed.
  @join_attempts 10
  @blob_attempts 20
  # Joins a herd makes under one permit, between looking at its mailbox.
  @join_chunk 25
  # How long a herd waits for a join permit before doing something else.
  @permit_wait_ms 20
  # How long, at most, before it asks again when none was free.
  @permit_retry_ms 100
  # The random integer a step gets, from the low bits of the herd's draw.
  @roll_bits Grove.Actor.roll_bits()
  @roll_mask Bitwise.bsl(1, @roll_bits) - 1
  # The low byte of a herd's tags: the index of the kind whose move it is.
  @kind_mask 255

  # The settings fixed at start are a map of their own (`config`), apart
  # from what the herd updates as it runs: a map of more than 32 keys is a
  # hash trie, slower to read and to update than a flat map, and a herd
  # updates its state at every message.
  defstruct [
    :world,
    :api,
    :config,
    # Its kinds, a tuple by the index its tags carry: each a map of the
    # kind's module, the `version` of it its actors' states are of (see
    # `code_change/3`), what it senses, the world's terrain when it
    # senses, its kind code and options, its counts (`stats`) and whether
    # its actors are residents.
    :kinds,
    :area,
    :rand,
    :timer,
    :beat,
    :window,
    :wheel,
    :join_timer,
    # How far a blob spawn's square has grown (see `join_blob/3`).
    :blob_radius,
    to_join: 0,
    # Who is still to join: `{kind index, how many}`, first joined first.
    joins: [],
    # Resident actors (`:resident`), each `{id, kind index}`: walked by
    # their zones, not on the wheel.
    residents: [],
    leaving: [],
    retiring: false,
    backoff: 0,
    slot: 0,
    paused: false
  ]

  @typedoc """
  The herd's settings, fixed at start: its actors' count, pace and kind,
  the kind's options, how it spawns and joins, and whether its moves may
  go to another node (`remote`).
  """
  @type config :: %{
          count: non_neg_integer(),
          interval: pos_integer(),
          jitter: float(),
          spawn: term(),
          resolution: pos_integer(),
          batch: boolean(),
          late_ms: non_neg_integer(),
          unseen_every: pos_integer(),
          zones_now: boolean(),
          join_timeout: timeout(),
          permits: term(),
          join_backoff: {pos_integer(), pos_integer()},
          remote: boolean(),
          native_per_us: pos_integer(),
          steps: boolean(),
          tally: boolean()
        }

  @type t :: %__MODULE__{}

  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts),
    do: GenServer.start_link(__MODULE__, opts, spawn_opt: Keyword.get(opts, :spawn_opt, []))

  @doc "Stops sending moves (outcomes still count), so a bench can drain."
  @spec pause(pid()) :: :ok
  def pause(herd), do: GenServer.call(herd, :pause, :infinity)

  @doc """
  Takes `count` of the herd's actors out of the world (leaving in the
  background, paced as joins are); the herd stops once it has none.
  Returns how many it takes out: `count` at most, as many as it has.
  """
  @spec retire(pid(), non_neg_integer()) :: non_neg_integer()
  def retire(herd, count), do: GenServer.call(herd, {:retire, count}, :infinity)

  @doc """
  The default bound on a herd's unanswered moves: twice the moves it sends
  in a slot on average, so that it never binds while the world keeps up
  (a slot's moves are answered long before the next slot).
  """
  @spec default_max_in_flight(pos_integer(), pos_integer(), pos_integer()) :: pos_integer()
  def default_max_in_flight(count, interval, resolution),
    do: max(2 * div(count * resolution + interval - 1, interval), 2)

  # Callbacks

  @impl true
  def init(opts) do
    # Low by default: the zones answer first (`Grove.Actors`'
    # `:herd_priority`; docs/decisions.md, "Herds run at low priority").
    # Never above the zones, which would starve the node.
    priority = Keyword.get(opts, :priority) || :low

    unless priority in [:low, :normal],
      do: raise(ArgumentError, ":priority must be :low or :normal, got: #{inspect(priority)}")

    Process.flag(:priority, priority)
    interval = Keyword.get(opts, :interval, 1000)
    resolution = Keyword.get(opts, :resolution, 100)
    world = Keyword.fetch!(opts, :world)
    api = Keyword.get(opts, :api, Grove.World)

    # A herd of one kind is given it as a herd's options of old (`:module`,
    # `:kind`, `:kind_options`, `:stats`, `:count`); one of several, as
    # `:kinds`, a list of maps of those keys.
    specs =
      Keyword.get_lazy(opts, :kinds, fn ->
        [
          %{
            module: Keyword.get(opts, :module, Grove.Actors.Walker),
            kind: Keyword.get(opts, :kind, :actor),
            kind_options: Keyword.get(opts, :kind_options, []),
            stats: Keyword.fetch!(opts, :stats),
            count: Keyword.fetch!(opts, :count)
          }
        ]
      end)

    if length(specs) > @kind_mask + 1,
      do: raise(ArgumentError, "a herd walks at most #{@kind_mask + 1} kinds")

    resident = Keyword.get(opts, :resident, false)
    kinds = specs |> Enum.map(&kind!(&1, api, world, resident)) |> List.to_tuple()
    count = specs |> Enum.map(& &1.count) |> Enum.sum()
    # The world's description read once: whether it is a cluster's.
    clustered = api == Grove.World and Grove.World.fetch!(world).cluster != nil

    config = %{
      count: count,
      interval: interval,
      jitter: Keyword.get(opts, :jitter, 0.2),
      spawn: Keyword.get(opts, :spawn, :uniform),
      resolution: resolution,
      batch: Keyword.get(opts, :batch, true),
      late_ms: Keyword.get(opts, :late_ms) || div(interval, 2),
      join_timeout: Keyword.get(opts, :join_timeout, 2000),
      permits: Keyword.get(opts, :join_permits),
      join_backoff: Keyword.get(opts, :join_backoff, {50, 5000}),
      # Only a world of a cluster has moves to count as sent to another
      # node: a world alone pays nothing for the count.
      remote: clustered,
      unseen_every: unseen_every(api, clustered, Keyword.get(opts, :unseen_every, 1)),
      zones_now: Code.ensure_loaded?(api) and function_exported?(api, :zones_now, 1),
      # Moves and actions to a zone in one message, in a world alone (a
      # cluster's nodes may run a release that does not take them).
      steps:
        Keyword.get(opts, :batch, true) and Code.ensure_loaded?(api) and
          function_exported?(api, :step_many, 3) and not clustered,
      # A slot's moves answered tallied (`Grove.World.move_many/3`): a
      # move taken as asked by its tag alone, where the herd reads no
      # more of its outcome (where it stands is the zones' tables'). The
      # world tallies only where it is alone, and answers a cluster's
      # moves as `move_many/2` does: the herd asks the same everywhere.
      tally:
        Keyword.get(opts, :batch, true) and Code.ensure_loaded?(api) and
          function_exported?(api, :move_many, 3),
      native_per_us: :erlang.convert_time_unit(1, :microsecond, :native)
    }

    herd = %__MODULE__{
      world: world,
      api: api,
      config: config,
      kinds: kinds,
      area: Keyword.get(opts, :area),
      to_join: count,
      joins:
        for({spec, index} <- Enum.with_index(specs), spec.count > 0, do: {index, spec.count}),
      # exsp: its next word is read directly at every turn (`turns/7`).
      rand: :rand.seed_s(:exsp)
    }

    # Its slots' offset in ms, 1 to `resolution`: a fraction of a slot
    # given (`:phase`, where a group spreads its herds over the slot), else
    # drawn.
    {phase, rand} =
      case Keyword.get(opts, :phase) do
        nil -> :rand.uniform_s(resolution, herd.rand)
        fraction -> {trunc(fraction * resolution) + 1, herd.rand}
      end

    native = &:erlang.convert_time_unit(&1, :millisecond, :native)

    window =
      Window.new(
        Keyword.get(opts, :max_in_flight) || default_max_in_flight(count, interval, resolution),
        native.(Keyword.get(opts, :target_ms, 100)),
        native.(Keyword.get(opts, :move_timeout, 5000)),
        :erlang.monotonic_time()
      )

    # A lane of the wheel a kind: a slot's turns are a run of each kind.
    wheel = Wheel.new(resolution, phase - 1, tuple_size(kinds))
    herd = %{herd | rand: rand, window: window, wheel: wheel}
    {:ok, %{herd | slot: current_slot(herd)}, {:continue, :join}}
  end

  # A kind as the herd keeps it, checked against what the world can say.
  defp kind!(spec, api, world, resident) do
    module = spec.module
    %{senses: senses, version: version} = Grove.Actor.describe!(module)

    if senses != nil and
         not (Code.ensure_loaded?(api) and function_exported?(api, :position, 2) and
                function_exported?(api, :nearby, 3)),
       do:
         raise(
           ArgumentError,
           "#{inspect(module)} senses, and #{inspect(api)} cannot say what: it has no position/2 and nearby/3"
         )

    if senses != nil and senses.game and
         not (function_exported?(api, :game_near, 3) and function_exported?(api, :attrs, 2)),
       do:
         raise(
           ArgumentError,
           "#{inspect(module)} senses the game, and #{inspect(api)} cannot say what: it has no game_near/3 and attrs/2"
         )

    %{
      module: module,
      version: version,
      senses: senses,
      terrain: if(senses, do: api.terrain(world)),
      code: Grove.World.kind_code(spec.kind),
      options: Map.get(spec, :kind_options, []),
      stats: spec.stats,
      # A kind that senses resides only where its zones can sense for it.
      resident: resident and (senses == nil or senses_here?(api, world))
    }
  end

  @impl true
  def handle_continue(:join, herd), do: {:noreply, join_some(herd)}

  # A tallied answer (`Grove.World.move_many/3`): a move taken as asked
  # by its tag alone, counted as a step taken, any other as an outcome.
  @impl true
  def handle_info({:grove_moved, answers}, herd), do: handle_info({:grove_moves, answers}, herd)

  def handle_info({:grove_moves, outcomes}, herd) do
    now = :erlang.monotonic_time()
    %__MODULE__{kinds: kinds, config: %{native_per_us: native_per_us}} = herd

    runs = count_outcomes(outcomes, kinds, now, native_per_us, nil, {0, 0, 0, []}, [])
    {window, answered} = Window.answered_counts(herd.window, runs, now)
    for {tag, count} <- answered, do: Stats.incr(stats_of(herd, tag), :in_flight, -count)
    {:noreply, %{herd | window: window}}
  end

  # A resident's step or action is answered to no one; a zone of another
  # release may answer it, by either tag it was ever given.
  def handle_info({:grove_move, _id, tag, _outcome}, herd) when is_walk(tag),
    do: {:noreply, herd}

  def handle_info({:grove_move, id, sent_at, outcome}, herd),
    do: handle_info({:grove_moves, [{id, sent_at, outcome}]}, herd)

  # A game's actions are answered like moves, and counted with them, alone
  # or with moves.
  def handle_info({:grove_acts, outcomes}, herd), do: handle_info({:grove_moves, outcomes}, herd)
  def handle_info({:grove_steps, outcomes}, herd), do: handle_info({:grove_moves, outcomes}, herd)

  def handle_info({:grove_act, _id, tag, _outcome}, herd) when is_walk(tag),
    do: {:noreply, herd}

  def handle_info({:grove_act, id, sent_at, outcome}, herd),
    do: handle_info({:grove_moves, [{id, sent_at, outcome}]}, herd)

  def handle_info(:join, herd), do: {:noreply, join_some(%{herd | join_timer: nil})}

  def handle_info(:leave, herd), do: herd |> leave_some() |> done_or_not()

  # A beat whose timer was replaced (a cancelled timer's message may be
  # on its way already) is not this herd's beat any more: walking on it
  # would start a second chain of timers.
  def handle_info({:beat, ref}, %__MODULE__{beat: beat} = herd) when ref != beat,
    do: {:noreply, herd}

  def handle_info({:beat, _ref}, herd) do
    now_ms = System.monotonic_time(:millisecond)
    now_slot = Wheel.slot_at(herd.wheel, now_ms)
    herd = herd |> expire() |> adapt_window()

    herd = Enum.reduce((herd.slot + 1)..now_slot//1, herd, &walk_slot(&2, &1, now_slot, now_ms))

    {:noreply, schedule(%{herd | slot: max(now_slot, herd.slot), timer: nil, beat: nil})}
  end

  # An actor whose entity went with a lost node (or whose node paused, short
  # of its cluster's quorum): off the wheel, and another joins in its
  # place, now or, while the node is paused, once it runs again.
  def handle_info({reason, id}, herd) when reason in [:grove_lost, :grove_paused] do
    case Wheel.drop_entry(herd.wheel, id) || drop_resident(herd, id) do
      nil ->
        {:noreply, herd}

      {{^id, last, _state, _zone}, wheel} ->
        {:noreply, rejoin(%{herd | wheel: wheel}, kind_of(last))}

      {index, residents} ->
        {:noreply, rejoin(%{herd | residents: residents}, index)}
    end
  end

  # Herds walk actors that do not watch; a view message could only come
  # from an actor kind that joined with views on, and is not for the herd.
  def handle_info(message, herd) when elem(message, 0) == :grove_view, do: {:noreply, herd}

  # An actor lost is counted so, and one of its kind joins in its place.
  defp rejoin(herd, index) do
    stats = elem(herd.kinds, index).stats
    Stats.incr(stats, :lost)
    Stats.incr(stats, :joined, -1)
    herd = %{herd | to_join: herd.to_join + 1, joins: [{index, 1} | herd.joins]}
    if herd.join_timer, do: herd, else: join_some(herd)
  end

  @impl true
  def handle_call({:retire, count}, _from, herd) do
    unjoined = min(count, herd.to_join)
    {entries, wheel} = Wheel.take_entries(herd.wheel, count - unjoined)
    taken = Enum.map(entries, fn {id, last, _state, _zone} -> {id, kind_of(last)} end)
    {resident, residents} = Enum.split(herd.residents, count - unjoined - length(taken))
    ids = resident ++ taken
    if herd.leaving == [] and ids != [], do: send(self(), :leave)

    herd = %{
      herd
      | to_join: herd.to_join - unjoined,
        joins: drop_last(herd.joins, unjoined),
        wheel: wheel,
        residents: residents,
        leaving: ids ++ herd.leaving,
        retiring: true
    }

    case done_or_not(herd) do
      {:noreply, herd} -> {:reply, unjoined + length(ids), herd}
      {:stop, :normal, herd} -> {:stop, :normal, unjoined, herd}
    end
  end

  def handle_call(:pause, _from, herd) do
    if herd.timer, do: Process.cancel_timer(herd.timer)
    {:reply, :ok, %{herd | paused: true, timer: nil, beat: nil}}
  end

  # Its kind's code was reloaded (`Grove.Actors.renew/3`, while the herd
  # is suspended, as OTP's release handling does it): what it senses may
  # have changed, and its actors' states take the new shape through
  # `upgrade/2` before any step of the new code runs. The version the
  # states are of is the herd's own: a herd started after the new code
  # was loaded has nothing to upgrade.
  @impl true
  def code_change(_old, herd, {:grove_renew, module, description}) do
    %{version: version} = description

    renewed =
      for index <- 0..(tuple_size(herd.kinds) - 1),
          %{module: ^module} = kind <- [elem(herd.kinds, index)],
          do: {index, kind}

    herd =
      Enum.reduce(renewed, herd, fn {index, kind}, herd ->
        wheel =
          case kind.version do
            ^version ->
              herd.wheel

            from ->
              Wheel.map(herd.wheel, fn
                {id, last, state, zone} when (last &&& @kind_mask) == index ->
                  {id, last, module.upgrade(state, from), zone}

                other ->
                  other
              end)
          end

        kind = %{
          kind
          | version: version,
            senses: description.senses,
            terrain: if(description.senses, do: herd.api.terrain(herd.world))
        }

        %{herd | wheel: wheel, kinds: put_elem(herd.kinds, index, kind)}
      end)

    {:ok, herd}
  end

  def code_change(_old, herd, _extra), do: {:ok, herd}

  # A herd that crashes gives back what it counted in flight (one that is
  # killed cannot; the gauge then stays high by its last count).
  @impl true
  def terminate(_reason, herd) do
    for {tag, left} <- herd.window.pending, do: Stats.incr(stats_of(herd, tag), :in_flight, -left)
  end

  # A tag of the herd's: the time a batch was sent (native units), its low
  # byte the index of the kind whose moves it carries.
  defp tag(sent_at, index), do: (sent_at &&& bnot(@kind_mask)) ||| index

  defp kind_of(tag), do: tag &&& @kind_mask

  # The tag an entry's kind is read from: an actor's last, a group's index.
  defp kind_tag({:group, _count, index, _members, _zone}), do: index
  defp kind_tag({_id, last, _state, _zone}), do: last

  # The wheel's lane of an actor whose last tag is `tag`: its kind's.
  defp lane(wheel, tag) do
    case kind_of(tag) do
      index when index < wheel.lanes -> index
      _none -> 0
    end
  end

  defp stats_of(herd, tag), do: kind_stats(herd.kinds, tag)

  # An answer to a tag of no kind of the herd's (not one it made) is
  # counted with its first kind.
  defp kind_stats(kinds, tag) do
    case kind_of(tag) do
      index when index < tuple_size(kinds) -> elem(kinds, index).stats
      _none -> elem(kinds, 0).stats
    end
  end

  ## Walking

  defp walk_slot(herd, slot, now_slot, now_ms) do
    case Wheel.pop_runs(herd.wheel, slot) do
      {nil, _wheel} ->
        herd

      {due, wheel} ->
        if now_ms - Wheel.due_ms(wheel, slot) > herd.config.late_ms do
          skip_late(%{herd | wheel: wheel}, Wheel.ungroup(Enum.concat(due)), now_slot)
        else
          move_due(%{herd | wheel: wheel}, due, slot, now_slot)
        end
    end
  end

  # A slot's turns, in one pass. This runs at every turn of every actor,
  # resting or not (20,000 a second in `make run`'s world), so it
  # allocates little per turn: the batch's constants are read from
  # `turn`, a record (a tuple: each field one read, where a map's were
  # searched by key), what changes at every turn is an argument of
  # `turns/7` and what changes seldom one tuple (`tally`), and the actors
  # that come back one, two or three slots after the one walked now (every
  # actor, at the default pace) gather in three lists put on the wheel
  # once a run, where a wheel update per turn copied the wheel's map of
  # slots; the others (a slower pace, a herd running late) gather by slot
  # in a map of their own.
  defp move_due(herd, due, slot, now_slot) do
    %__MODULE__{config: config, window: window, wheel: wheel, rand: {rand_alg, rand}} = herd
    jitter_ms = round(config.interval * config.jitter)
    sent_at = :erlang.monotonic_time()

    turn =
      turn(
        herd: herd,
        wheel: wheel,
        pending: window.pending,
        size: window.size,
        slot: slot,
        first: now_slot + 1,
        draws: Wheel.wait_span(wheel, jitter_ms) <<< @roll_bits,
        interval: config.interval,
        jitter_ms: jitter_ms,
        tag: sent_at,
        every: config.unseen_every,
        where: zones_now(herd)
      )

    # The slot's turns run by run of one kind, each run counted in its
    # kind's row and put back in its kind's lane; the moves of all go out
    # together.
    {moves, wheel, rand, in_flight, acts, sent_by_kind} =
      runs(due, turn, {[], wheel, rand, window.in_flight, %{}, 0, []}, sent_at)

    sent = in_flight - window.in_flight
    if sent > 0, do: send_moves(herd, moves, acts)

    window =
      Enum.reduce(sent_by_kind, window, fn {tag, sent}, window ->
        Window.sent(window, tag, sent)
      end)

    %{herd | wheel: wheel, rand: {rand_alg, rand}, window: window}
  end

  # A slot's turns, one run of actors of one kind after another: the
  # wheel keeps a lane a kind, so a slot comes as a run of each (`due`, a
  # list a lane), and each run's actors go back in its kind's lane, in
  # lists by the slot they come back in. A run ends at the first actor of
  # another kind (`turns/7`), so a lane that holds another kind's actors
  # (put there by hand) is taken as several runs.
  defp runs([], _turn, {moves, wheel, rand, in_flight, _zones, acts, sent_by_kind}, _sent_at),
    do: {moves, wheel, rand, in_flight, acts, sent_by_kind}

  defp runs([[] | lanes], turn, acc, sent_at), do: runs(lanes, turn, acc, sent_at)

  defp runs([[head | _] = due | lanes], turn, acc, sent_at) do
    turn(herd: herd, first: first) = turn
    {moves, wheel, rand, in_flight, zones, acts, sent_by_kind} = acc
    last = kind_tag(head)
    index = kind_of(last)
    kind = elem(herd.kinds, index)
    tag = tag(sent_at, index)
    turn = turn(turn, kind: kind, index: index, tag: tag)

    {run_moves, back, rand, run_in_flight, tally, rest} =
      turns(due, turn, moves, {[], [], [], %{}}, rand, in_flight, {0, 0, 0, 0, %{}, zones, acts})

    {unanswered, full, stayed, rested, resting, zones, acts} = tally
    {back, rand, rested} = :maps.fold(&regroup(&1, &2, turn, &3), {back, rand, rested}, resting)
    sent = run_in_flight - in_flight
    count_turns(herd, kind.stats, sent, {unanswered, full, stayed, rested}, run_moves)
    {back1, back2, back3, later} = back
    lane = lane(wheel, last)

    wheel =
      later
      |> Enum.reduce(wheel, fn {next, entries}, wheel ->
        Wheel.add_all(wheel, next, entries, lane)
      end)
      |> Wheel.add_all(first, back1, lane)
      |> Wheel.add_all(first + 1, back2, lane)
      |> Wheel.add_all(first + 2, back3, lane)

    acc = {run_moves, wheel, rand, run_in_flight, zones, acts, [{tag, sent} | sent_by_kind]}
    runs([rest | lanes], turn, acc, sent_at)
  end

  # A run's turns counted in its kind's row: moves sent, skipped, stayed
  # and rested (its moves are the first `sent` of `moves`, newest first).
  defp count_turns(herd, stats, sent, {unanswered, full, stayed, rested}, moves) do
    if sent > 0, do: Stats.incr(stats, :sent, sent)
    if sent > 0, do: Stats.incr(stats, :in_flight, sent)
    if unanswered > 0, do: Stats.incr(stats, :skipped_unanswered, unanswered)
    if full > 0, do: Stats.incr(stats, :skipped_full, full)
    if stayed > 0, do: Stats.incr(stats, :stayed, stayed)
    if rested > 0, do: Stats.incr(stats, :rested, rested)

    if herd.config.remote and sent > 0,
      do:
        count_remote(
          herd,
          stats,
          for({_id, _dir, _tag} = move <- Enum.take(moves, sent), do: move)
        )
  end

  # The tally's counts and maps (`turns/7`).
  @unanswered 0
  @full 1
  @stayed 2
  @rested 3
  @resting 4
  @zones 5
  @acts 6

  # A run's turns, entry by entry. At every turn: the moves and a game's
  # actions, tagged with when they were sent (`moves`, newest first), the
  # actors by the slot they come back in (`back`), the generator's state
  # and the moves in flight. Seldom, one tuple, `tally`: the turns skipped
  # as unanswered (`@unanswered`) or full (`@full`), those that stayed
  # (`@stayed`), the groups' actors that rested (`@rested`), the actors
  # that rest this turn alone, by zone (`@resting`, zone => {how many,
  # their entries}: they go back on the wheel after the run, a zone's as
  # one group, `regroup/4`), whether each zone met this batch rests
  # (`@zones`), and the game's actions among the moves, the slot's so far
  # (`@acts`: a slot of moves alone is sent as it is). An actor's entry
  # and a group's are taken by a function each (`actor_turn/8`,
  # `group_turn/8`), which goes on with the run; a run ends at the first
  # actor or group of another kind, and the rest of the slot is given
  # back with the run's results.
  defp turns([entry | due] = all, turn, moves, back, rand, in_flight, tally) do
    case entry do
      {_id, last, _state, _zone} when (last &&& @kind_mask) == turn(turn, :index) ->
        actor_turn(entry, due, turn, moves, back, rand, in_flight, tally)

      {:group, _count, index, _members, _zone} when index == turn(turn, :index) ->
        group_turn(entry, due, turn, moves, back, rand, in_flight, tally)

      _other_kind ->
        {moves, back, rand, in_flight, tally, all}
    end
  end

  defp turns([], _turn, moves, back, rand, in_flight, tally),
    do: {moves, back, rand, in_flight, tally, []}

  # An actor's turn: skipped while its last batch is not fully answered
  # (`Window.unanswered?/2`) or the window is full, rested where nobody
  # watches its zone this turn, else taken.
  defp actor_turn(
         {_id, last, _state, _zone} = entry,
         due,
         turn,
         moves,
         back,
         rand,
         in_flight,
         tally
       ) do
    turn(pending: pending, size: size, every: every) = turn

    cond do
      is_map_key(pending, last) ->
        {back, rand} = come_back(back, rand, turn, entry)
        turns(due, turn, moves, back, rand, in_flight, add(tally, @unanswered, 1))

      in_flight >= size ->
        {back, rand} = come_back(back, rand, turn, entry)
        turns(due, turn, moves, back, rand, in_flight, add(tally, @full, 1))

      # Every turn taken, seen or not: nothing to ask.
      every == 1 ->
        take_turn(entry, due, turn, moves, back, rand, in_flight, tally)

      true ->
        case rests_unseen?(turn, entry, tally) do
          {true, tally, {_id, _last, _state, zone} = entry} ->
            resting = rest(elem(tally, @resting), zone, entry)
            turns(due, turn, moves, back, rand, in_flight, put_elem(tally, @resting, resting))

          {false, tally, entry} ->
            take_turn(entry, due, turn, moves, back, rand, in_flight, tally)
        end
    end
  end

  # A zone's actors that rested together come as one entry: they rest
  # again together, with one question, one draw and one place on the
  # wheel (skipped together if the window is full), or, where their zone
  # takes this turn, each takes its own. Its members' last moves are all
  # answered (each was asked where it stands, which a turn asks only
  # then), so none is skipped unanswered.
  defp group_turn(group, due, turn, moves, back, rand, in_flight, tally) do
    {:group, count, _index, members, zone} = group

    cond do
      in_flight >= turn(turn, :size) ->
        {back, rand} = come_back(back, rand, turn, group)
        turns(due, turn, moves, back, rand, in_flight, add(tally, @full, count))

      true ->
        case zone_rests?(turn, zone, tally) do
          {true, tally} ->
            {back, rand} = come_back(back, rand, turn, group)
            turns(due, turn, moves, back, rand, in_flight, add(tally, @rested, count))

          {false, tally} ->
            {moves, back, rand, in_flight, tally, []} =
              turns(members, turn, moves, back, rand, in_flight, tally)

            turns(due, turn, moves, back, rand, in_flight, tally)
        end
    end
  end

  defp add(tally, at, count), do: put_elem(tally, at, elem(tally, at) + count)

  # An entry skipped (or a group rested): back on the wheel, its next turn
  # drawn.
  defp come_back(back, rand, turn, entry) do
    {next, _draw, rand} = next_turn(turn, rand)
    {back(back, next, turn, entry), rand}
  end

  # When an actor (or a group) comes back, and the random integer its
  # step gets. `rand` is the state of the herd's exsp generator, whose
  # next word (58 bits) is read directly: `:rand.uniform_s/2`, through the
  # algorithm's handler and its checks of the range, cost twice as much at
  # every turn. The draw is that word modulo `draws` (its bias, about one
  # in 20 million at the default pace, is nothing a walk shows).
  # Counted from when the move was due, not from when the herd got to
  # it, so a herd running a little late keeps its actors' pace. One due
  # before the herd's next slot comes back in the first slot of its own
  # pace after it: a herd that stalled for longer than a wait spreads
  # its actors over the slots they came in before, where putting them all
  # in the next slot would bunch them there for good when their waits
  # never vary, and its window of moves would let the same few through.
  defp next_turn(turn, rand) do
    turn(
      slot: slot,
      first: first,
      draws: draws,
      wheel: wheel,
      interval: interval,
      jitter_ms: jitter_ms
    ) = turn

    {word, rand} = :rand.exsp_next(rand)
    draw = rem(word, draws)
    wait = Wheel.wait_slots(wheel, interval, jitter_ms, draw >>> @roll_bits)
    next = if slot + wait > first, do: slot + wait, else: first + Integer.mod(slot - first, wait)
    {next, draw, rand}
  end

  # A turn taken: the kind decides, and a move or an action joins the batch.
  defp take_turn({id, last, state, zone}, due, turn, moves, back, rand, in_flight, tally) do
    {next, draw, rand} = next_turn(turn, rand)
    tag = turn(turn, :tag)

    case decide(turn(turn, :herd), turn(turn, :kind), id, state, draw &&& @roll_mask) do
      {:stay, state} ->
        back = back(back, next, turn, {id, last, state, zone})
        turns(due, turn, moves, back, rand, in_flight, add(tally, @stayed, 1))

      {{:act, action, target}, state} ->
        moves = [{id, action, target, %{}, tag} | moves]
        back = back(back, next, turn, {id, tag, state, nil})
        turns(due, turn, moves, back, rand, in_flight + 1, add(tally, @acts, 1))

      {{:act, action, target, args}, state} ->
        moves = [{id, action, target, args, tag} | moves]
        back = back(back, next, turn, {id, tag, state, nil})
        turns(due, turn, moves, back, rand, in_flight + 1, add(tally, @acts, 1))

      {direction, state} ->
        moves = [{id, direction, tag} | moves]
        back = back(back, next, turn, {id, tag, state, nil})
        turns(due, turn, moves, back, rand, in_flight + 1, tally)
    end
  end

  # An actor in the list of the slot it comes back in.
  defp back({back1, back2, back3, later}, next, turn, entry) do
    case next - turn(turn, :first) do
      0 -> {[entry | back1], back2, back3, later}
      1 -> {back1, [entry | back2], back3, later}
      2 -> {back1, back2, [entry | back3], later}
      _ -> {back1, back2, back3, Map.update(later, next, [entry], &[entry | &1])}
    end
  end

  # An actor that rests this turn, with its zone's.
  defp rest(resting, zone, entry) do
    case resting do
      %{^zone => {count, entries}} -> %{resting | zone => {count + 1, [entry | entries]}}
      %{} -> Map.put(resting, zone, {1, [entry]})
    end
  end

  # A zone's actors that rested in a run, each alone on the wheel, go
  # back together: one entry, one draw of when they come back (the one
  # each would have drawn, whose wait is as long on average), one place in
  # a slot's list. Where nobody watches, three turns in four rest, and the
  # wheel, its draws and the turns that only ask whether to rest were most
  # of a resting herd's work, each actor by itself (docs/decisions.md, "A
  # zone's actors nobody sees rest together"). A group comes back when
  # each of its actors would: where its zone takes that turn (watched, or
  # one of its slots), each takes its own and draws its own wait from
  # there, and a group that rests again goes back as it is, not merged
  # with others of its zone: its actors were in one slot already, and
  # merged at every rest a zone's actors would gather in ever fewer slots.
  # An actor alone stays an entry of its own.
  defp regroup(_zone, {1, [entry]}, turn, {back, rand, rested}) do
    {back, rand} = come_back(back, rand, turn, entry)
    {back, rand, rested + 1}
  end

  defp regroup(zone, {count, members}, turn, {back, rand, rested}) do
    group = {:group, count, turn(turn, :index), members, zone}
    {back, rand} = come_back(back, rand, turn, group)
    {back, rand, rested + count}
  end

  # Where nobody watches, an actor takes one turn in `unseen_every` on
  # average and rests the others: nothing is decided, sensed or sent.
  # Whether anyone watches its zone is asked once per zone in a batch
  # (the tally's `@zones`, zone => rests?, built as the batch meets them;
  # a batch is one slot of one instant), so an actor steps as before from
  # its first batch after someone comes to watch its zone.
  # The turns taken are those that fall in the slots its zone takes, one
  # in `unseen_every`, drawn by a hash of the slot and the zone: a zone
  # nobody watches gets a herd's batch that often, each as full as
  # before, where resting turns at random would leave it a batch every
  # slot with a quarter of the moves (a batch's messages cost as much as
  # its moves). A hash, not every `unseen_every`th slot: an actor whose
  # waits are all the same length (no jitter) could otherwise fall in
  # none of its zone's slots.
  # The actor's zone is read from the world once after each move and kept
  # with it on the wheel (its entry's last element, nil until read): only
  # its own moves change the zone an entity stands in, and a turn comes to
  # this question only once its last move is answered (or given up on), so
  # what was read since is what the world would say now. A resting turn,
  # three in four where nobody watches, reads nothing of the world's
  # directory.
  # The world is read once a batch (`zones_now/1`, in `turn`), where the
  # world offers it: a lookup of the world's settings and directory at
  # each turn cost as much as the rest of a resting turn.
  defp rests_unseen?(turn, {id, last, state, nil} = entry, tally) do
    turn(where: where, herd: %__MODULE__{api: api}) = turn

    case zone_index(api, where, id) do
      nil -> {false, tally, entry}
      zone -> rests_unseen?(turn, {id, last, state, zone}, tally)
    end
  end

  defp rests_unseen?(turn, {_id, _last, _state, zone} = entry, tally) do
    {rests, tally} = zone_rests?(turn, zone, tally)
    {rests, tally, entry}
  end

  # Whether a zone's actors rest this turn, asked once a zone a batch.
  defp zone_rests?(turn(every: 1), _zone, tally), do: {false, tally}

  defp zone_rests?(turn, zone, tally) do
    case elem(tally, @zones) do
      %{^zone => rests} ->
        {rests, tally}

      zones ->
        turn(every: every, where: where, slot: slot, herd: %__MODULE__{api: api}) = turn
        rests = :erlang.phash2({slot, zone}, every) != 0 and not api.zone_watched?(where, zone)
        {rests, put_elem(tally, @zones, Map.put(zones, zone, rests))}
    end
  end

  # Grove.World's called by name, not through the module in a variable,
  # which looks the function up at each call: this runs at every turn.
  defp zone_index(Grove.World, where, id), do: Grove.World.zone_index(where, id)
  defp zone_index(api, where, id), do: api.zone_index(where, id)

  defp zones_now(%__MODULE__{config: %{unseen_every: 1}}), do: nil
  defp zones_now(%__MODULE__{config: %{zones_now: false}, world: world}), do: world
  defp zones_now(%__MODULE__{api: api, world: world}), do: api.zones_now(world)

  # Resting unseen actors needs a world that says where it is watched; a
  # world of several nodes may be watched from another, so it never rests.
  defp unseen_every(_api, _clustered, 1), do: 1

  defp unseen_every(api, clustered, every) do
    cond do
      not (Code.ensure_loaded?(api) and function_exported?(api, :zone_index, 2) and
               function_exported?(api, :zone_watched?, 2)) ->
        1

      clustered ->
        1

      true ->
        every
    end
  end

  # The kind's step. A kind that senses nothing is given nothing; one that
  # senses gets what the zones' tables say now, and an actor whose cell
  # cannot be read (in the instant of a handoff) stays this turn.
  defp decide(_herd, %{senses: nil, module: module}, _id, state, roll),
    do: module.step(state, nil, roll)

  defp decide(herd, %{senses: %{radius: radius} = senses} = kind, id, state, roll) do
    case herd.api.position(herd.world, id) do
      nil ->
        {:stay, state}

      at ->
        sensed = %Senses{
          id: id,
          kind: kind.code,
          at: at,
          radius: radius,
          terrain: kind.terrain,
          entities: if(senses.entities, do: neighbours(herd, id, at, radius))
        }

        kind.module.step(state, game_senses(herd, sensed, senses.game), roll)
    end
  end

  # What a kind that plays the game senses of it: the layer within its
  # radius, where it blocks, and the actor's own attributes (ETS reads).
  defp game_senses(_herd, senses, false), do: senses

  defp game_senses(herd, %Senses{id: id, at: at, radius: radius} = senses, true) do
    {cells, walk} = herd.api.game_near(herd.world, at, radius)

    attrs =
      case herd.api.attrs(herd.world, id) do
        {attrs, _look} -> attrs
        nil -> nil
      end

    %{senses | cells: cells, walk: walk, attrs: attrs}
  end

  defp neighbours(herd, id, at, radius) do
    for {other, _, _, _} = entity <- herd.api.nearby(herd.world, at, radius),
        other != id,
        do: entity
  end

  # Nobody moves: each late actor comes back at a random slot of its next
  # interval, so that a herd that was held up does not send its backlog
  # at once later on.
  defp skip_late(herd, due, now_slot) do
    interval_slots = interval_slots(herd)

    {wheel, rand} =
      Enum.reduce(due, {herd.wheel, herd.rand}, fn {_id, last, _state, _zone} = entry,
                                                   {wheel, rand} ->
        {offset, rand} = :rand.uniform_s(interval_slots, rand)
        {Wheel.add(wheel, now_slot + offset, entry, lane(wheel, last)), rand}
      end)

    due
    |> Enum.frequencies_by(fn {_id, last, _state, _zone} -> kind_of(last) end)
    |> Enum.each(fn {index, count} ->
      Stats.incr(elem(herd.kinds, index).stats, :skipped_late, count)
    end)

    %{herd | wheel: wheel, rand: rand}
  end

  # The window halves if answers came late, or grows if they came in time
  # (see `Herd.Window`).
  defp adapt_window(herd),
    do: %{herd | window: Window.adapt(herd.window, :erlang.monotonic_time())}

  # Batches still not fully answered after `move_timeout` are given up on:
  # their actors may move again.
  defp expire(herd) do
    case Window.expire_batches(herd.window, :erlang.monotonic_time()) do
      {_window, []} ->
        herd

      {window, batches} ->
        for {tag, expired} <- batches do
          Stats.incr(stats_of(herd, tag), :expired, expired)
          Stats.incr(stats_of(herd, tag), :in_flight, -expired)
        end

        %{herd | window: window}
    end
  end

  # Moves (3-tuples) and actions (5-tuples) go in a batch each, or, where
  # the world takes both at once (`step_many/3`), in one a zone. A slot
  # with no action (`acts`, how many; a walker's every slot) is sent as
  # it is, with no pass to split it.
  defp send_moves(herd, moves, 0), do: send_steps(herd, moves)

  defp send_moves(herd, sent, _acts) do
    {acts, moves} = split_acts(sent, [], [])

    if acts != [] do
      acts
      |> Enum.frequencies_by(fn {_id, _action, _target, _args, tag} -> tag end)
      |> Enum.each(fn {tag, count} -> Stats.incr(stats_of(herd, tag), :acts_sent, count) end)
    end

    cond do
      acts == [] ->
        send_steps(herd, moves)

      moves != [] and herd.config.steps ->
        herd.api.step_many(herd.world, moves, acts)

      true ->
        if moves != [], do: send_steps(herd, moves)
        herd.api.act_many(herd.world, acts)
    end
  end

  # In one pass, keeping each list's order (most of a slot is moves).
  defp split_acts([{_id, _direction, _sent_at} = move | rest], acts, moves),
    do: split_acts(rest, acts, [move | moves])

  defp split_acts([act | rest], acts, moves), do: split_acts(rest, [act | acts], moves)
  defp split_acts([], acts, moves), do: {:lists.reverse(acts), :lists.reverse(moves)}

  defp send_steps(%__MODULE__{config: %{tally: true}} = herd, moves),
    do: herd.api.move_many(herd.world, moves, tally: true)

  defp send_steps(%__MODULE__{config: %{batch: true}} = herd, moves),
    do: herd.api.move_many(herd.world, moves)

  defp send_steps(herd, moves) do
    for {id, direction, sent_at} <- moves, do: herd.api.move(herd.world, id, direction, sent_at)
  end

  # Where the moves just sent went is read as `move_many/2` read it, from
  # the directory and the zones' locations (no message).
  defp count_remote(herd, stats, moves) do
    case Grove.World.remote_moves(herd.world, moves) do
      0 -> :ok
      remote -> Stats.incr(stats, :sent_remote, remote)
    end
  end

  # Each actor is on the wheel once, as `{id, the tag of its last move (its
  # kind's index alone before its first), its kind's state, its zone if
  # read since its last move}`, or in a group of its zone's actors that
  # rest together, `{:group, count, its kind's index, their entries, the
  # zone}` (`regroup/4`), which no pattern of an actor's entry matches.
  defp schedule(herd) do
    case Wheel.next_due(herd.wheel, herd.slot + 1, herd.slot + 2 * interval_slots(herd) + 2) do
      nil ->
        herd

      next ->
        beat = make_ref()

        timer =
          Process.send_after(self(), {:beat, beat}, Wheel.due_ms(herd.wheel, next), abs: true)

        %{herd | timer: timer, beat: beat}
    end
  end

  # Moves a timer set for later than the earliest slot now on the wheel.
  defp reschedule(%__MODULE__{paused: true} = herd), do: herd
  defp reschedule(%__MODULE__{timer: nil} = herd), do: schedule(herd)

  defp reschedule(herd) do
    Process.cancel_timer(herd.timer)
    schedule(%{herd | timer: nil, beat: nil})
  end

  defp current_slot(herd), do: Wheel.slot_at(herd.wheel, System.monotonic_time(:millisecond))

  # Slots in an interval, rounded up: how far ahead spread moves may go.
  defp interval_slots(herd), do: Wheel.slots(herd.wheel, herd.config.interval)

  # A zone answers a batch's moves in one message, all sent at once: the
  # outcomes of one tag (one round trip) are counted by key as they come,
  # the three a walk mostly gets (a step, a taken cell, a blocking one) in
  # arguments, any other in a list, and the round trip is recorded once
  # for them all, in the counts of the kind their tag names. Keyed runs
  # cost a counter and a histogram's record each time the key changed,
  # about every second outcome where a third of the steps are refused.
  # A tallied answer's step taken is its tag alone (an integer). Returns
  # the runs, `{tag, how many}` each, for the window (`Window.answered_counts/3`):
  # the answers are walked once.
  defp count_outcomes([tag | rest], kinds, now, per_us, tag, counts, runs) do
    {ok, occupied, blocked, other} = counts
    count_outcomes(rest, kinds, now, per_us, tag, {ok + 1, occupied, blocked, other}, runs)
  end

  defp count_outcomes([{_id, tag, outcome} | rest], kinds, now, per_us, tag, counts, runs) do
    count_outcomes(rest, kinds, now, per_us, tag, counted(counts, outcome), runs)
  end

  defp count_outcomes([answer | _] = outcomes, kinds, now, per_us, at, counts, runs) do
    runs = flush_outcomes(kinds, now, per_us, at, counts, runs)
    count_outcomes(outcomes, kinds, now, per_us, answer_tag(answer), {0, 0, 0, []}, runs)
  end

  defp count_outcomes([], kinds, now, per_us, at, counts, runs),
    do: flush_outcomes(kinds, now, per_us, at, counts, runs)

  defp counted({ok, occupied, blocked, other}, {:ok, {_x, _y}}),
    do: {ok + 1, occupied, blocked, other}

  defp counted({ok, occupied, blocked, other}, {:rejected, :occupied}),
    do: {ok, occupied + 1, blocked, other}

  defp counted({ok, occupied, blocked, other}, {:rejected, :blocked}),
    do: {ok, occupied, blocked + 1, other}

  defp counted({ok, occupied, blocked, other}, outcome),
    do: {ok, occupied, blocked, [outcome_key(outcome) | other]}

  defp flush_outcomes(_kinds, _now, _per_us, _tag, {0, 0, 0, []}, runs), do: runs

  defp flush_outcomes(kinds, now, per_us, tag, {ok, occupied, blocked, []}, runs) do
    keyed = [ok: ok, occupied: occupied, blocked: blocked]
    Stats.outcomes(kind_stats(kinds, tag), keyed, div(now - tag, per_us))
    [{tag, ok + occupied + blocked} | runs]
  end

  defp flush_outcomes(kinds, now, per_us, tag, {ok, occupied, blocked, other}, runs) do
    keyed =
      Enum.reduce(other, [ok: ok, occupied: occupied, blocked: blocked], fn key, keyed ->
        Keyword.update(keyed, key, 1, &(&1 + 1))
      end)

    Stats.outcomes(kind_stats(kinds, tag), keyed, div(now - tag, per_us))
    [{tag, ok + occupied + blocked + length(other)} | runs]
  end

  defp answer_tag({_id, tag, _outcome}), do: tag
  defp answer_tag(tag) when is_integer(tag), do: tag

  defp outcome_key({:ok, {_x, _y}}), do: :ok
  defp outcome_key({:ok, data}) when is_map(data), do: :acted
  defp outcome_key({:refused, _reason}), do: :refused
  defp outcome_key({:rejected, reason}), do: reason

  ## Retiring

  # Leaves a chunk under a permit, like a join; a leave the world could not
  # answer now (`:busy`, `:timeout`) is tried again after a backoff. An
  # actor the world does not know any more (its zone was lost) is gone
  # all the same.
  defp leave_some(%__MODULE__{leaving: []} = herd), do: herd

  defp leave_some(herd) do
    {chunk, rest} = Enum.split(herd.leaving, @join_chunk)

    outcome =
      case herd.config.permits do
        nil ->
          {:ok, leave_chunk(herd, chunk, [])}

        permits ->
          Grove.Permits.run(permits, @permit_wait_ms, fn -> leave_chunk(herd, chunk, []) end)
      end

    case outcome do
      {:ok, []} when rest == [] ->
        %{herd | leaving: [], backoff: 0}

      {:ok, []} ->
        send(self(), :leave)
        %{herd | leaving: rest, backoff: 0}

      {:ok, refused} ->
        refused
        |> Enum.frequencies_by(&elem(&1, 1))
        |> Enum.each(fn {index, count} ->
          Stats.incr(elem(herd.kinds, index).stats, :leave_retried, count)
        end)

        {first, most} = herd.config.join_backoff
        backoff = herd.backoff |> Kernel.*(2) |> max(first) |> min(most)
        {extra, rand} = :rand.uniform_s(div(backoff, 2) + 1, herd.rand)
        Process.send_after(self(), :leave, div(backoff, 2) + extra)
        %{herd | leaving: refused ++ rest, backoff: backoff, rand: rand}

      {:error, :busy} ->
        {pause, rand} = :rand.uniform_s(@permit_retry_ms, herd.rand)
        Process.send_after(self(), :leave, pause)
        %{herd | rand: rand}
    end
  end

  defp leave_chunk(_herd, [], refused), do: refused

  # Each leaving actor is `{id, kind index}`.
  defp leave_chunk(herd, [{id, index} = leaving | rest], refused) do
    case herd.api.leave(herd.world, id) do
      {:error, reason} when reason in [:busy, :timeout] ->
        leave_chunk(herd, rest, [leaving | refused])

      _left_or_gone ->
        Stats.incr(elem(herd.kinds, index).stats, :left)
        leave_chunk(herd, rest, refused)
    end
  end

  defp done_or_not(%__MODULE__{retiring: true, to_join: 0, leaving: []} = herd) do
    if Wheel.empty?(herd.wheel) and herd.residents == [],
      do: {:stop, :normal, herd},
      else: {:noreply, herd}
  end

  defp done_or_not(herd), do: {:noreply, herd}

  ## Joining

  # The joins to come less the last `count`.
  defp drop_last(joins, 0), do: joins

  defp drop_last(joins, count) do
    joins
    |> Enum.reverse()
    |> Enum.flat_map_reduce(count, fn
      {_index, n}, left when left >= n -> {[], left - n}
      {index, n}, left -> {[{index, n - left}], 0}
    end)
    |> elem(0)
    |> Enum.reverse()
  end

  # Joins a chunk under a permit, puts the new actors on the wheel, and
  # says when to go on: at once (after the mailbox), after a pause when no
  # permit was free, or after a backoff when the world refused.
  defp join_some(%__MODULE__{to_join: 0} = herd), do: herd

  defp join_some(herd) do
    {status, joined, herd} =
      case herd.config.permits do
        nil ->
          join_chunk(herd, @join_chunk, [])

        permits ->
          case Grove.Permits.run(permits, @permit_wait_ms, fn ->
                 join_chunk(herd, @join_chunk, [])
               end) do
            {:ok, result} -> result
            {:error, :busy} -> {:no_permit, [], herd}
          end
      end

    herd = start_walking(herd, joined)

    case status do
      _ when herd.to_join == 0 ->
        herd

      :more ->
        send(self(), :join)
        %{herd | backoff: 0}

      :no_permit ->
        {pause, rand} = :rand.uniform_s(@permit_retry_ms, herd.rand)
        later(%{herd | rand: rand}, pause)

      :refused ->
        Stats.incr(joining_stats(herd), :join_retried)
        {first, most} = herd.config.join_backoff
        backoff = herd.backoff |> Kernel.*(2) |> max(first) |> min(most)
        # Half the backoff, plus up to as much again at random: herds
        # refused together do not come back together.
        {extra, rand} = :rand.uniform_s(div(backoff, 2) + 1, herd.rand)
        later(%{herd | backoff: backoff, rand: rand}, div(backoff, 2) + extra)
    end
  end

  defp later(herd, ms), do: %{herd | join_timer: Process.send_after(self(), :join, ms)}

  defp join_chunk(herd, 0, joined), do: {:more, joined, herd}
  defp join_chunk(%__MODULE__{to_join: 0} = herd, _left, joined), do: {:more, joined, herd}

  defp join_chunk(herd, left, joined) do
    [{index, _} | _] = herd.joins
    stats = elem(herd.kinds, index).stats
    {result, herd} = join_one(herd, @join_attempts)

    case result do
      {:ok, id, _cell} ->
        Stats.incr(stats, :joined)
        herd = %{herd | to_join: herd.to_join - 1, joins: joined_one(herd.joins), backoff: 0}
        join_chunk(herd, left - 1, [{id, index} | joined])

      # Busy, or paused until its cluster is whole again: later.
      {:error, reason} when reason in [:busy, :timeout, :paused] ->
        {:refused, joined, herd}

      {:error, reason} ->
        # Counted for whoever watches; one log line per herd is enough to say why.
        if Stats.read(stats).counts.join_failed == 0,
          do:
            Logger.warning(
              "actors: an actor could not join (#{reason}): #{why_not_joined(reason)}; " <>
                "the status line counts those that could not"
            )

        Stats.incr(stats, :join_failed)
        herd = %{herd | to_join: herd.to_join - 1, joins: joined_one(herd.joins)}
        join_chunk(herd, left - 1, joined)
    end
  end

  # The joins to come once the first has joined (or failed to).
  defp joined_one([{_index, 1} | rest]), do: rest
  defp joined_one([{index, n} | rest]), do: [{index, n - 1} | rest]

  # The counts of the kind joining next.
  defp joining_stats(%__MODULE__{joins: [{index, _} | _], kinds: kinds}),
    do: elem(kinds, index).stats

  defp why_not_joined(:no_free_cell), do: "the world has no free cell left for it"
  defp why_not_joined(:out_of_bounds), do: "its cell is off the world"
  defp why_not_joined(:blocked), do: "its cell is ground nothing stands on"
  defp why_not_joined(:occupied), do: "its cell stayed taken"
  defp why_not_joined(_other), do: "the world refused it"

  # First moves are spread evenly over one interval, so actors that join
  # together do not move together.
  defp start_walking(herd, []), do: herd

  # Residents walk in their zones: the herd only keeps them, to retire them.
  # Residents walk in their zones: the herd only keeps them, to retire them.
  defp start_walking(herd, joined) do
    now_slot = current_slot(herd)
    interval_slots = interval_slots(herd)

    {residents, walked} = Enum.split_with(joined, &elem(herd.kinds, elem(&1, 1)).resident)

    {wheel, rand} =
      Enum.reduce(walked, {herd.wheel, herd.rand}, fn {id, index}, {wheel, rand} ->
        %{module: module, options: options} = elem(herd.kinds, index)
        {offset, rand} = :rand.uniform_s(interval_slots, rand)
        {roll, rand} = :rand.uniform_s(@roll_mask + 1, rand)
        state = module.init(options, roll - 1)
        # No move yet: the tag of its last move is its kind's alone.
        {Wheel.add(wheel, now_slot + offset, {id, index, state, nil}, index), rand}
      end)

    herd = %{herd | residents: residents ++ herd.residents}
    if walked == [], do: herd, else: reschedule(%{herd | wheel: wheel, rand: rand})
  end

  defp join_one(%__MODULE__{config: %{spawn: {:blob, center, spread}}} = herd, _attempts),
    do: join_blob(herd, center, spread)

  defp join_one(herd, attempts) do
    {at, herd} = start_cell(herd)

    case join_at(herd, at) do
      {:error, reason} when reason in [:occupied, :blocked] and attempts > 1 ->
        join_one(herd, attempts - 1)

      # The home area is full: anywhere will do.
      {:error, :no_free_cell} when herd.area != nil and attempts > 1 ->
        join_one(%{herd | area: nil}, attempts - 1)

      result ->
        {result, herd}
    end
  end

  defp start_cell(%__MODULE__{area: nil} = herd), do: {:random, herd}
  defp start_cell(%__MODULE__{area: area} = herd), do: {{:within, area}, herd}

  defp join_at(herd, at) do
    [{index, _} | _] = herd.joins
    kind = elem(herd.kinds, index)
    {walk, herd} = walk(herd, kind)

    opts = [at: at, updates: :none, kind: kind.code, timeout: herd.config.join_timeout]
    herd.api.join(herd.world, if(walk, do: [{:walk, walk} | opts], else: opts))
  end

  # Zones sense for their residents in a world given `:senses`.
  defp senses_here?(Grove.World, world), do: Grove.World.fetch!(world).senses != nil
  defp senses_here?(_api, _world), do: false

  # A resident's walk: its kind, its first state and its pace.
  defp walk(herd, %{resident: false}), do: {nil, herd}

  defp walk(herd, %{module: module, options: options}) do
    {roll, rand} = :rand.uniform_s(@roll_mask + 1, herd.rand)
    state = module.init(options, roll - 1)
    {{module, state, herd.config.interval}, %{herd | rand: rand}}
  end

  # A resident's kind index and the residents left, or nil if `id` is none.
  defp drop_resident(herd, id) do
    case List.keytake(herd.residents, id, 0) do
      {{^id, index}, residents} -> {index, residents}
      nil -> nil
    end
  end

  # A blob: first a cell drawn around the centre (normally, `spread` cells
  # from it on average); where that one is taken, any free cell of a square
  # around the centre that doubles its side until it has one. So every
  # actor gets a cell while the world has one, as near the centre as the
  # crowd already there allows: the blob grows outward as it fills. A herd
  # remembers how far its square has grown, where its next actor looks.
  defp join_blob(herd, center, spread) do
    {drawn, herd} = blob_draw(herd, center, spread, @blob_attempts)

    case drawn && join_at(herd, drawn) do
      {:ok, _id, _cell} = joined -> {joined, herd}
      {:error, reason} = later when reason in [:busy, :timeout, :paused] -> {later, herd}
      _taken_or_none -> grow_blob(herd, center, herd.blob_radius || max(ceil(spread), 1), 0)
    end
  end

  defp grow_blob(herd, {cx, cy} = center, radius, tries) do
    %Grid{width: width, height: height} = herd.api.grid(herd.world)
    square = {cx - radius, cy - radius, cx + radius + 1, cy + radius + 1}

    whole_world? =
      cx - radius <= 0 and cy - radius <= 0 and cx + radius >= width and cy + radius >= height

    herd = %{herd | blob_radius: radius}

    case join_at(herd, {:within, square}) do
      # Square by square, the world's placement samples cells: only a
      # square that is the whole world, sampled as often as a uniform
      # spawn would be, may say the world is full.
      {:error, reason} when reason in [:no_free_cell, :out_of_bounds] and not whole_world? ->
        grow_blob(herd, center, 2 * radius, tries)

      {:error, :no_free_cell} when tries + 1 < @join_attempts ->
        grow_blob(herd, center, radius, tries + 1)

      result ->
        {result, herd}
    end
  end

  defp blob_draw(herd, _center, _spread, 0), do: {nil, herd}

  defp blob_draw(herd, {cx, cy} = center, spread, attempts) do
    %Grid{} = grid = herd.api.grid(herd.world)
    terrain = herd.api.terrain(herd.world)
    {dx, rand} = :rand.normal_s(herd.rand)
    {dy, rand} = :rand.normal_s(rand)
    herd = %{herd | rand: rand}
    x = cx + round(dx * spread)
    y = cy + round(dy * spread)

    if Grid.in_bounds?(grid, x, y) and not Grove.World.Terrain.blocked?(terrain, x, y),
      do: {{x, y}, herd},
      else: blob_draw(herd, center, spread, attempts - 1)
  end
end
