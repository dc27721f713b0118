defmodule Grove.Load.Report do
  @moduledoc """
  Reports people read, from a load run or a bench: JSON for machines, and a
  Markdown page with an SVG chart of throughput and p99 over time, drawn by
  Grove itself (no plotting service).

  A report is a map; its `:windows` (one per progress line) carry `:t`
  (seconds), `:moves_per_s` and `:p99_ms`, which is what the chart draws.
  """

  @width 760
  @height 260
  @pad 48

  @doc "The report as a term jiffy encodes: `nil` becomes null, atoms strings."
  @spec to_json(term()) :: term()
  def to_json(nil), do: :null
  def to_json(map) when is_map(map), do: Map.new(map, fn {k, v} -> {to_string(k), to_json(v)} end)
  def to_json(list) when is_list(list), do: Enum.map(list, &to_json/1)
  def to_json(value) when is_atom(value) and value not in [true, false], do: Atom.to_string(value)
  def to_json(value), do: value

  @doc """
  A figure as progress lines and text reports print it: `-` for none, one
  decimal for a float.

      iex> Grove.Load.Report.figure(12.345)
      "12.3"
      iex> Grove.Load.Report.figure(nil)
      "-"
  """
  @spec figure(number() | nil) :: String.t()
  def figure(nil), do: "-"
  def figure(n) when is_float(n), do: :erlang.float_to_binary(n, decimals: 1)
  def figure(n), do: to_string(n)

  @doc """
  Writes `path` (Markdown) and the chart next to it (same name, `.svg`), and
  returns the Markdown. `command` is the argument list the run was started
  with, quoted in the report so it can be run again.
  """
  @spec write(Path.t(), String.t(), map(), [String.t()]) :: String.t()
  def write(path, title, report, command) do
    svg_path = Path.rootname(path) <> ".svg"
    File.mkdir_p!(Path.dirname(path))
    File.write!(svg_path, chart(Map.get(report, :windows, [])))
    markdown = markdown(title, report, command, Path.basename(svg_path))
    File.write!(path, markdown)
    markdown
  end

  @doc "The Markdown page of a report."
  @spec markdown(String.t(), map(), [String.t()], String.t()) :: String.t()
  def markdown(title, report, command, svg_name \\ "chart.svg") do
    rows =
      report
      |> Map.drop([:windows, :stages, :baseline, :by_url])
      |> Enum.sort_by(fn {k, _} -> to_string(k) end)
      |> Enum.map_join("\n", fn {key, value} -> "| #{key} | #{format(value)} |" end)

    """
    # #{title}

    Command: `#{Enum.join(command, " ")}`

    Machine: #{System.schedulers_online()} schedulers, OTP #{System.otp_release()}, Elixir #{System.version()}.

    ![throughput and p99 over time](#{svg_name})

    | figure | value |
    | --- | --- |
    #{rows}
    #{by_url(Map.get(report, :by_url, []))}\
    """
  end

  # A run on several servers' URLs: each one's part.
  defp by_url([]), do: ""

  defp by_url(by_url) do
    rows =
      Enum.map_join(by_url, "\n", fn u ->
        "| #{u.url} | #{u.players} | #{u.connected} | #{u.connect_failures} | " <>
          "#{u.connect_pending} | #{u.connect_retries} | #{u.moves_per_s} | " <>
          "#{format(u.p50_ms)} | #{format(u.p99_ms)} | #{u.errors} | #{u.correctness_failures} |"
      end)

    """

    ## By URL

    | URL | players | connects ok | failed | pending | tried again | moves/s | p50 ms | p99 ms | errors | failures |
    | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
    #{rows}
    """
  end

  @doc """
  An SVG line chart of the windows: throughput (moves per second, left axis,
  green) and p99 round trip (ms, right axis, orange) over time.
  """
  @spec chart([map()]) :: String.t()
  def chart(windows) do
    points = for w <- windows, do: {w.t, w[:moves_per_s] || 0, w[:p99_ms]}
    max_t = points |> Enum.map(&elem(&1, 0)) |> Enum.max(fn -> 1 end) |> max(1)
    max_rate = points |> Enum.map(&elem(&1, 1)) |> Enum.max(fn -> 1 end) |> nice()
    max_p99 = points |> Enum.map(&(elem(&1, 2) || 0)) |> Enum.max(fn -> 1 end) |> nice()

    x = fn t -> @pad + t / max_t * (@width - 2 * @pad) end
    y = fn v, max -> @height - @pad + 0.0 - v / max * (@height - 2 * @pad) end

    rate_line =
      Enum.map_join(points, " ", fn {t, r, _} -> "#{round1(x.(t))},#{round1(y.(r, max_rate))}" end)

    p99_line =
      points
      |> Enum.reject(fn {_, _, p} -> p == nil end)
      |> Enum.map_join(" ", fn {t, _, p} -> "#{round1(x.(t))},#{round1(y.(p, max_p99))}" end)

    ticks =
      for i <- 0..4 do
        yy = round1(@height - @pad - i / 4 * (@height - 2 * @pad))

        """
        <line x1="#{@pad}" y1="#{yy}" x2="#{@width - @pad}" y2="#{yy}" stroke="#e5e5e5"/>
        <text x="#{@pad - 6}" y="#{yy + 4}" text-anchor="end" fill="#2f7d32">#{round(max_rate * i / 4)}</text>
        <text x="#{@width - @pad + 6}" y="#{yy + 4}" fill="#c25e00">#{round1(max_p99 * i / 4)}</text>
        """
      end

    """
    <svg xmlns="http://www.w3.org/2000/svg" width="#{@width}" height="#{@height}" viewBox="0 0 #{@width} #{@height}" font-family="sans-serif" font-size="11">
    <rect width="100%" height="100%" fill="white"/>
    #{Enum.join(ticks)}
    <polyline fill="none" stroke="#2f7d32" stroke-width="2" points="#{rate_line}"/>
    <polyline fill="none" stroke="#c25e00" stroke-width="2" points="#{p99_line}"/>
    <text x="#{@pad}" y="16" fill="#2f7d32">moves/s</text>
    <text x="#{@width - @pad}" y="16" text-anchor="end" fill="#c25e00">p99 ms</text>
    <text x="#{div(@width, 2)}" y="#{@height - 12}" text-anchor="middle" fill="#555">seconds (0 to #{max_t})</text>
    </svg>
    """
  end

  # A round upper bound for an axis.
  defp nice(value) when value <= 0, do: 1

  defp nice(value) do
    magnitude = :math.pow(10, floor(:math.log10(value)))

    Enum.find_value([1, 2, 5, 10], fn step ->
      if value <= step * magnitude, do: step * magnitude
    end)
  end

  defp round1(v), do: Float.round(v * 1.0, 1)

  defp format(value) when is_map(value),
    do: value |> Enum.map_join(", ", fn {k, v} -> "#{k} #{format(v)}" end)

  defp format(nil), do: "-"
  defp format(value) when is_float(value), do: :erlang.float_to_binary(value, decimals: 2)
  defp format(value), do: to_string(value)
end
