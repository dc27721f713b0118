defmodule Grove.Load.Soak do
  @moduledoc """
  What a long run watches on the server, and whether it grows.

  A sampler reads the server's `/metrics` every few seconds during a load
  run (`mix grove.load ws --sample-every 5`) and keeps the gauges that leak
  when something leaks: BEAM memory (all of it, processes, ETS, binaries),
  the process count, the port count, the ETS table count and the longest
  mailbox.

  ## The growth test, fixed in advance

  A gauge **grows** when, over the samples after the first fifth of the run
  (the warm-up, while players connect and heaps settle), the least-squares
  slope is positive with a t-statistic above 3 (the slope is at least three
  standard errors from zero, so noise alone seldom passes) **and** the fitted
  line rises by more than 5 % of the gauge's mean over those samples (so a
  statistically clear but negligible drift, such as a few KB on hundreds of
  MB, is not called a leak). Both thresholds are set here, before any run,
  and the report prints the slope, its t and the rise for every gauge.
  """

  @gauges [
    memory: ~s(grove_beam_memory_bytes{kind="total"}),
    processes_memory: ~s(grove_beam_memory_bytes{kind="processes"}),
    ets_memory: ~s(grove_beam_memory_bytes{kind="ets"}),
    binary_memory: ~s(grove_beam_memory_bytes{kind="binary"}),
    processes: "grove_beam_processes",
    ports: "grove_beam_ports",
    ets_tables: "grove_beam_ets_tables",
    mailbox_max: "grove_beam_mailbox_max",
    # Zones on demand: those running now (a world of them only).
    zones_awake: "grove_zones_awake"
  ]

  @warm_up 0.2
  @min_t 3.0
  @min_rise 0.05

  @type sample :: {seconds :: number(), %{atom() => number()}}
  @type trend :: %{
          first: number(),
          last: number(),
          min: number(),
          max: number(),
          per_hour: float(),
          t: float(),
          rise: float(),
          grows: boolean()
        }

  @doc "The gauges watched, in report order."
  @spec gauges() :: [atom()]
  def gauges, do: Keyword.keys(@gauges)

  @doc "The watched gauges found in a Prometheus text."
  @spec parse(String.t()) :: %{atom() => number()}
  def parse(text) do
    values =
      for line <- String.split(text, "\n"),
          [name, value] <- [String.split(line, " ", parts: 2)],
          into: %{},
          do: {name, value}

    for {key, name} <- @gauges, value = values[name], value != nil, into: %{} do
      {number, _} = Float.parse(value)
      {key, number}
    end
  end

  @doc "The trend of every gauge over the samples (see the module doc)."
  @spec trends([sample()]) :: %{atom() => trend()}
  def trends(samples) do
    kept = Enum.drop(samples, floor(length(samples) * @warm_up))

    for key <- gauges(),
        points = for({t, values} <- kept, is_number(values[key]), do: {t, values[key]}),
        length(points) >= 3,
        into: %{},
        do: {key, trend(points)}
  end

  @doc "The trend of one series of `{seconds, value}` points (at least three)."
  @spec trend([{number(), number()}]) :: trend()
  def trend(points) when length(points) >= 3 do
    n = length(points)
    {ts, ys} = Enum.unzip(points)
    mean_t = Enum.sum(ts) / n
    mean_y = Enum.sum(ys) / n
    stt = Enum.sum(for t <- ts, do: (t - mean_t) * (t - mean_t))
    sty = Enum.sum(for {t, y} <- points, do: (t - mean_t) * (y - mean_y))
    slope = if stt > 0, do: sty / stt, else: 0.0

    residuals =
      Enum.sum(for {t, y} <- points, do: :math.pow(y - mean_y - slope * (t - mean_t), 2))

    standard_error = if stt > 0, do: :math.sqrt(residuals / (n - 2) / stt), else: 0.0

    t =
      cond do
        standard_error > 0 -> slope / standard_error
        slope > 0 -> :infinity
        slope < 0 -> :neg_infinity
        true -> 0.0
      end

    span = Enum.max(ts) - Enum.min(ts)
    rise = if mean_y != 0, do: slope * span / abs(mean_y), else: 0.0

    %{
      first: hd(ys),
      last: List.last(ys),
      min: Enum.min(ys),
      max: Enum.max(ys),
      per_hour: slope * 3600,
      t: t,
      rise: rise,
      grows: slope > 0 and above?(t, @min_t) and rise > @min_rise
    }
  end

  defp above?(:infinity, _), do: true
  defp above?(:neg_infinity, _), do: false
  defp above?(t, limit), do: t > limit

  ## The sampler

  @doc """
  Starts a process that reads `url` every `every` seconds, from now until
  `stop/1`, which returns the samples (seconds since the start, gauges).
  """
  @spec start(String.t(), String.t() | nil, pos_integer()) :: pid()
  def start(url, token, every) do
    owner = self()
    started = System.monotonic_time(:millisecond)
    spawn_link(fn -> sample(owner, url, token, every * 1000, started, []) end)
  end

  @doc "Stops the sampler and returns its samples, oldest first."
  @spec stop(pid()) :: [sample()]
  def stop(sampler) do
    send(sampler, {:stop, self()})

    receive do
      {^sampler, samples} -> samples
    end
  end

  defp sample(owner, url, token, every_ms, started, acc) do
    at = (System.monotonic_time(:millisecond) - started) / 1000

    acc =
      case scrape(url, token) do
        nil -> acc
        text -> [{at, parse(text)} | acc]
      end

    receive do
      {:stop, ^owner} -> send(owner, {self(), Enum.reverse(acc)})
    after
      every_ms -> sample(owner, url, token, every_ms, started, acc)
    end
  end

  @doc "The server's `/metrics` text, or `nil` if it does not answer 200 within 5 s."
  @spec scrape(String.t(), String.t() | nil) :: String.t() | nil
  def scrape(url, token) do
    headers = if token, do: [{~c"authorization", ~c"Bearer " ++ to_charlist(token)}], else: []

    case :httpc.request(:get, {to_charlist(url), headers}, [timeout: 5000], body_format: :binary) do
      {:ok, {{_, 200, _}, _headers, body}} -> body
      _ -> nil
    end
  end
end
