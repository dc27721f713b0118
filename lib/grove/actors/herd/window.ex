defmodule Grove.Actors.Herd.Window do
  @moduledoc false
  # How many moves a herd lets be unanswered: its window, at most `max`.
  # Moves go out in batches, all tagged with the (native, monotonic) time
  # the batch was sent; `pending` counts each batch's unanswered moves, so
  # an actor whose last batch is not fully answered waits (`unanswered?/2`),
  # and the herd sends nothing while `in_flight` fills the window
  # (`full?/1`).
  #
  # At each beat (`adapt/2`) the window halves if a move sent since it
  # last halved took longer than `target` to be answered (the world is
  # queueing), and otherwise grows by an eighth of `max` if answers came
  # in time (with no answer, nothing says there is room). So under
  # overload the herds together keep about what the world answers within
  # the target in flight, whatever their number, and the round trip stays
  # near the target instead of growing with the actors. A batch with moves
  # unanswered after `timeout` is given up on (`expire/2`), so an outcome
  # lost with a crashed zone cannot keep its actors still for ever.
  #
  # Plain data: times are passed in, in native units.

  defstruct [
    :max,
    :size,
    :target,
    :timeout,
    :decreased_at,
    in_flight: 0,
    pending: %{},
    slow: false,
    timely: false
  ]

  @type time :: integer()
  @type t :: %__MODULE__{
          max: pos_integer(),
          size: pos_integer(),
          target: non_neg_integer(),
          timeout: non_neg_integer(),
          decreased_at: time(),
          in_flight: non_neg_integer(),
          pending: %{time() => pos_integer()},
          slow: boolean(),
          timely: boolean()
        }

  @doc """
  A window of `max` moves, open wide, whose answers should come within
  `target` and are given up on after `timeout` (both in native units).
  """
  @spec new(pos_integer(), non_neg_integer(), non_neg_integer(), time()) :: t()
  def new(max, target, timeout, now),
    do: %__MODULE__{max: max, size: max, target: target, timeout: timeout, decreased_at: now}

  @doc "True when the herd has as many moves unanswered as the window allows."
  @spec full?(t()) :: boolean()
  def full?(%__MODULE__{in_flight: in_flight, size: size}), do: in_flight >= size

  @doc "True when the batch sent at `sent_at` still has moves unanswered."
  @spec unanswered?(t(), time()) :: boolean()
  def unanswered?(%__MODULE__{pending: pending}, sent_at), do: is_map_key(pending, sent_at)

  @doc "A batch of `count` moves went out at `sent_at`."
  @spec sent(t(), time(), non_neg_integer()) :: t()
  def sent(window, _sent_at, 0), do: window

  def sent(window, sent_at, count) do
    %{
      window
      | pending: Map.update(window.pending, sent_at, count, &(&1 + count)),
        in_flight: window.in_flight + count
    }
  end

  @doc """
  Outcomes (`{id, sent_at, outcome}`, each tagged with the time its move
  was sent, or a tallied answer's `sent_at` alone for a step taken) came
  at `now`: returns the window and how many of them were
  still counted (answers to a batch given up on change nothing). The
  slowest answer to a move sent since the window last halved says whether
  answers come in time.
  """
  @spec answered(t(), [{term(), time(), term()} | time()], time()) :: {t(), non_neg_integer()}
  def answered(window, outcomes, now) do
    {window, runs} = answered_runs(window, outcomes, now)
    {window, runs |> Enum.map(&elem(&1, 1)) |> Enum.sum()}
  end

  @doc """
  `answered/3`, with how many moves were still counted for each batch
  (`{sent_at, count}`, a batch once or more), where a herd of several
  kinds tells its kinds' batches apart.
  """
  @spec answered_runs(t(), [{term(), time(), term()} | time()], time()) ::
          {t(), [{time(), non_neg_integer()}]}
  def answered_runs(window, outcomes, now) do
    {pending, runs, slowest} =
      answer(outcomes, window.decreased_at, now, {window.pending, [], nil})

    answered = runs |> Enum.map(&elem(&1, 1)) |> Enum.sum()
    window = %{window | pending: pending, in_flight: window.in_flight - answered}
    {timed(window, slowest), runs}
  end

  @doc """
  `answered_runs/3`, for answers already counted by batch: `runs` is a
  list of `{sent_at, count}`, the answers to each batch that came (a batch
  once or more), as a herd that reads its answers' runs for its own
  counts has them, so that the answers are walked once.
  """
  @spec answered_counts(t(), [{time(), pos_integer()}], time()) ::
          {t(), [{time(), non_neg_integer()}]}
  def answered_counts(window, runs, now) do
    {pending, counted, slowest} =
      count_runs(runs, window.decreased_at, now, {window.pending, [], nil})

    answered = counted |> Enum.map(&elem(&1, 1)) |> Enum.sum()
    window = %{window | pending: pending, in_flight: window.in_flight - answered}
    {timed(window, slowest), counted}
  end

  defp count_runs([{sent_at, count} | rest], decreased_at, now, acc),
    do: count_runs(rest, decreased_at, now, answer_run(sent_at, count, decreased_at, now, acc))

  defp count_runs([], _decreased_at, _now, acc), do: acc

  # A zone answers a batch's moves together, all sent at the same time:
  # each run of outcomes with one `sent_at` is counted off at once. A
  # tallied answer's step taken is its `sent_at` alone.
  defp answer([outcome | rest], decreased_at, now, acc) do
    sent_at = sent_at(outcome)
    {count, rest} = run(rest, sent_at, 1)
    answer(rest, decreased_at, now, answer_run(sent_at, count, decreased_at, now, acc))
  end

  defp answer([], _decreased_at, _now, acc), do: acc

  defp sent_at({_id, sent_at, _outcome}), do: sent_at
  defp sent_at(sent_at) when is_integer(sent_at), do: sent_at

  defp run([{_id, sent_at, _outcome} | rest], sent_at, count), do: run(rest, sent_at, count + 1)
  defp run([sent_at | rest], sent_at, count), do: run(rest, sent_at, count + 1)
  defp run(rest, _sent_at, count), do: {count, rest}

  defp answer_run(sent_at, count, decreased_at, now, {pending, runs, slowest}) do
    slowest = if sent_at > decreased_at, do: max(now - sent_at, slowest || 0), else: slowest

    case pending do
      %{^sent_at => left} when left <= count ->
        {Map.delete(pending, sent_at), [{sent_at, left} | runs], slowest}

      %{^sent_at => left} ->
        {%{pending | sent_at => left - count}, [{sent_at, count} | runs], slowest}

      _ ->
        {pending, runs, slowest}
    end
  end

  defp timed(window, nil), do: window
  defp timed(window, elapsed) when elapsed > window.target, do: %{window | slow: true}
  defp timed(window, _elapsed), do: %{window | timely: true}

  @doc """
  Gives up on the batches still not fully answered `timeout` before
  `now`: their actors may move again. Returns the window and how many
  moves were given up on.
  """
  @spec expire(t(), time()) :: {t(), non_neg_integer()}
  def expire(window, now) do
    {window, old} = expire_batches(window, now)
    {window, old |> Enum.map(&elem(&1, 1)) |> Enum.sum()}
  end

  @doc """
  `expire/2`, with the batches given up on (`{sent_at, moves}`), where a
  herd of several kinds tells its kinds' batches apart.
  """
  @spec expire_batches(t(), time()) :: {t(), [{time(), pos_integer()}]}
  def expire_batches(%__MODULE__{pending: pending} = window, _now) when map_size(pending) == 0,
    do: {window, []}

  def expire_batches(window, now) do
    cutoff = now - window.timeout

    case for({sent_at, left} <- window.pending, sent_at <= cutoff, do: {sent_at, left}) do
      [] ->
        {window, []}

      old ->
        expired = old |> Enum.map(&elem(&1, 1)) |> Enum.sum()

        {%{
           window
           | pending: Map.drop(window.pending, Enum.map(old, &elem(&1, 0))),
             in_flight: window.in_flight - expired
         }, old}
    end
  end

  @doc "At a beat: halves the window if answers came late, else grows it if they came in time."
  @spec adapt(t(), time()) :: t()
  def adapt(%__MODULE__{slow: true} = window, now),
    do: %{
      window
      | size: max(div(window.size, 2), 1),
        slow: false,
        timely: false,
        decreased_at: now
    }

  def adapt(%__MODULE__{timely: true, size: size, max: max} = window, _now),
    do: %{window | size: min(size + max(div(max, 8), 1), max), timely: false}

  def adapt(window, _now), do: window
end
