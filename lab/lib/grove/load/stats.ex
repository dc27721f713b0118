defmodule Grove.Load.Stats do
  @moduledoc false
  # What a load run's bots see, shared without a process hop: counters, the
  # move round trip and connect time histograms, and counts of disconnects
  # and correctness failures by kind. `:moves_skipped` counts the moves a
  # player did not send when they came due, its previous one unanswered;
  # `:restored` the players welcomed again under their id, their entity
  # lost with a node of a cluster and placed again; `:connect_retries` the
  # upgrades tried again after a refusal's `Retry-After` (a player fails
  # to connect, `:connect_failures`, only once its retries have run out),
  # `:connect_pending` the players waiting now to try again. Actions (a
  # game's) are counted as sent and answered (`:acted`), their round trip apart
  # from moves' (`act_latency`); so are lines said (`:says_sent`, `:said`,
  # those answered other than `ok` in `:says_refused`, round trip
  # `say_latency`), and the chat lines players heard (`:chat_heard`).
  # Moves refused are counted by the world's reason (`refused`), the
  # server's `error` frames by their code (`errors`; a frame the player
  # could not decode is `:undecodable`), with the first text of each
  # (`error_texts`, which says why, such as a join's).

  alias Grove.Metrics.Histogram

  @keys [
    :started,
    :connected,
    :connect_failures,
    :connect_retries,
    :connect_pending,
    :joined,
    :restored,
    :moves_sent,
    :moves_skipped,
    :acts_sent,
    :acted,
    :says_sent,
    :said,
    :says_refused,
    :chat_heard,
    :outcomes,
    :outcomes_ok,
    :timeouts,
    :view_frames,
    :views_checked,
    :frames_in,
    :bytes_in,
    :bytes_out,
    :protocol_errors,
    :disconnects,
    :correctness_failures
  ]

  @disconnect_reasons [
    :shutdown,
    :slow_consumer,
    :too_many_errors,
    :replaced,
    :too_large,
    :closed,
    :error
  ]
  @failures [
    :position,
    :unexpected_outcome,
    :stacked_view,
    :entity_on_blocked_cell,
    :stale_own_entity,
    :identity
  ]
  @refusals Grove.World.rejections()
  @error_codes Grove.Protocol.error_codes() ++ [:undecodable]

  for {key, index} <-
        Enum.with_index(
          @keys ++
            Enum.map(@disconnect_reasons, &{:disconnect, &1}) ++
            Enum.map(@failures, &{:failure, &1}) ++
            Enum.map(@refusals, &{:refused, &1}) ++
            Enum.map(@error_codes, &{:error, &1}),
          1
        ) do
    defp index(unquote(Macro.escape(key))), do: unquote(index)
  end

  defstruct [:counters, :latency, :act_latency, :say_latency, :connect, :texts]

  @type t :: %__MODULE__{}

  @spec new() :: t()
  def new do
    size =
      length(@keys) + length(@disconnect_reasons) + length(@failures) + length(@refusals) +
        length(@error_codes)

    %__MODULE__{
      counters: :counters.new(size, [:write_concurrency]),
      latency: Histogram.new(),
      act_latency: Histogram.new(),
      say_latency: Histogram.new(),
      connect: Histogram.new(),
      texts: :ets.new(:grove_load_error_texts, [:set, :public, write_concurrency: true])
    }
  end

  def disconnect_reasons, do: @disconnect_reasons
  def failures, do: @failures

  @spec incr(t(), term(), integer()) :: :ok
  def incr(%__MODULE__{counters: c}, key, by \\ 1), do: :counters.add(c, index(key), by)

  @spec disconnect(t(), atom()) :: :ok
  def disconnect(stats, reason) do
    reason = if reason in @disconnect_reasons, do: reason, else: :error
    incr(stats, :disconnects)
    incr(stats, {:disconnect, reason})
  end

  @spec failure(t(), atom()) :: :ok
  def failure(stats, kind) when kind in @failures do
    incr(stats, :correctness_failures)
    incr(stats, {:failure, kind})
  end

  @doc "A move the world refused, by its reason."
  @spec refused(t(), atom()) :: :ok
  def refused(stats, reason) when reason in @refusals, do: incr(stats, {:refused, reason})

  @doc "An `error` frame from the server, by its code, or one that did not decode."
  @spec error(t(), atom(), String.t()) :: :ok
  def error(stats, code, text) do
    code = if code in @error_codes, do: code, else: :undecodable
    :ets.insert_new(stats.texts, {code, text})
    incr(stats, :protocol_errors)
    incr(stats, {:error, code})
  end

  @doc """
  A reading of everything, to diff against a later one; of a list of
  stats, one reading of them all, as if they were one.
  """
  @spec read(t() | [t(), ...]) :: map()
  def read([_ | _] = list), do: list |> Enum.map(&read/1) |> Enum.reduce(&merge/2)

  def read(%__MODULE__{counters: c} = stats) do
    %{
      counts: Map.new(@keys, &{&1, :counters.get(c, index(&1))}),
      disconnects:
        Map.new(@disconnect_reasons, &{&1, :counters.get(c, index({:disconnect, &1}))}),
      failures: Map.new(@failures, &{&1, :counters.get(c, index({:failure, &1}))}),
      refused: Map.new(@refusals, &{&1, :counters.get(c, index({:refused, &1}))}),
      errors: Map.new(@error_codes, &{&1, :counters.get(c, index({:error, &1}))}),
      error_texts: Map.new(:ets.tab2list(stats.texts)),
      latency: Histogram.snapshot(stats.latency),
      act_latency: Histogram.snapshot(stats.act_latency),
      say_latency: Histogram.snapshot(stats.say_latency),
      connect: Histogram.snapshot(stats.connect)
    }
  end

  @doc "Two readings added together."
  @spec merge(map(), map()) :: map()
  def merge(a, b) do
    %{
      counts: Map.merge(a.counts, b.counts, fn _k, x, y -> x + y end),
      disconnects: Map.merge(a.disconnects, b.disconnects, fn _k, x, y -> x + y end),
      failures: Map.merge(a.failures, b.failures, fn _k, x, y -> x + y end),
      refused: Map.merge(a.refused, b.refused, fn _k, x, y -> x + y end),
      errors: Map.merge(a.errors, b.errors, fn _k, x, y -> x + y end),
      error_texts: Map.merge(b.error_texts, a.error_texts),
      latency: Histogram.merge(a.latency, b.latency),
      act_latency: Histogram.merge(a.act_latency, b.act_latency),
      say_latency: Histogram.merge(a.say_latency, b.say_latency),
      connect: Histogram.merge(a.connect, b.connect)
    }
  end

  @doc "What happened between two readings."
  @spec diff(map(), map()) :: map()
  def diff(later, earlier) do
    %{
      counts: Map.new(later.counts, fn {k, v} -> {k, v - earlier.counts[k]} end),
      disconnects: Map.new(later.disconnects, fn {k, v} -> {k, v - earlier.disconnects[k]} end),
      failures: Map.new(later.failures, fn {k, v} -> {k, v - earlier.failures[k]} end),
      refused: Map.new(later.refused, fn {k, v} -> {k, v - earlier.refused[k]} end),
      errors: Map.new(later.errors, fn {k, v} -> {k, v - earlier.errors[k]} end),
      error_texts: later.error_texts,
      latency: Histogram.diff(later.latency, earlier.latency),
      act_latency: Histogram.diff(later.act_latency, earlier.act_latency),
      say_latency: Histogram.diff(later.say_latency, earlier.say_latency),
      connect: Histogram.diff(later.connect, earlier.connect)
    }
  end
end
