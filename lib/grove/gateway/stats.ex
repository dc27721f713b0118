defmodule Grove.Gateway.Stats do
  @moduledoc false
  # The gateway's hot counters, like Grove.World.Stats: one `:counters`
  # array written by session processes without any hop.

  @keys [
    :sessions,
    :connections,
    :refused,
    :frames_in,
    :bytes_in,
    :writes_json,
    :bytes_out_json,
    :writes_binary,
    :bytes_out_binary,
    :views_held,
    :slow_consumers,
    # Connections reset because the client did not take its goodbye in time.
    :goodbyes_reset,
    :protocol_errors,
    :rate_limited,
    :too_large,
    :drained,
    :positions_unavailable,
    # Players' moves settled by the gateway: their zone died holding them.
    :moves_settled,
    # Players placed again after their zone was lost with its node, and
    # players told to rejoin (their node lost its cluster, or no cell was free).
    :restored,
    :rejoin_asked,
    # Requests the front door refused as they were read, by status.
    :refused_400,
    :refused_413,
    :refused_414,
    :refused_431,
    :refused_501,
    :refused_505,
    # HTTP clients that closed or fell silent in the middle of a request.
    :client_errors,
    # HTTP requests in flight when a stop ended Yaws's server.
    :cut_by_stop,
    # A game's actions the gateway answered itself: an unknown name or bad
    # arguments, and more than the connection's rate.
    :acts_refused,
    :acts_rate_limited,
    # Lines the gateway refused to say, by what was wrong; announcements
    # posted by the operator.
    :says_empty,
    :says_too_long,
    :says_bad_utf8,
    :says_bad_character,
    :says_rate_limited,
    :announcements
  ]

  # Bad client messages, by the code of the error they were answered
  # (`Grove.Protocol.error_codes/0`), beside their total.
  @error_codes Grove.Protocol.error_codes()
  @keys @keys ++ for(code <- @error_codes, do: :"protocol_error_#{code}")

  for {key, index} <- Enum.with_index(@keys, 1) do
    defp index(unquote(key)), do: unquote(index)
  end

  @type t :: :counters.counters_ref()

  @spec new() :: t()
  def new, do: :counters.new(length(@keys), [:write_concurrency])

  @spec incr(t(), atom(), integer()) :: :ok
  def incr(stats, key, by \\ 1), do: :counters.add(stats, index(key), by)

  @spec get(t(), atom()) :: integer()
  def get(stats, key), do: :counters.get(stats, index(key))

  @doc "Counts a bad client message answered with the error `code`."
  @spec protocol_error(t(), atom()) :: :ok
  def protocol_error(stats, code) when code in @error_codes do
    incr(stats, :protocol_errors)
    incr(stats, :"protocol_error_#{code}")
  end

  def protocol_error(stats, _code), do: incr(stats, :protocol_errors)

  @doc "Bad client messages so far, by error code."
  @spec protocol_errors(%{atom() => integer()}) :: [{atom(), integer()}]
  def protocol_errors(read),
    do: for(code <- @error_codes, do: {code, read[:"protocol_error_#{code}"]})

  @spec read(t()) :: %{atom() => integer()}
  def read(stats), do: Map.new(@keys, &{&1, :counters.get(stats, index(&1))})
end
