defmodule Grove.Gateway.Api do
  @moduledoc false
  # The HTTP JSON API of accounts (docs/api.md): device login, register,
  # login, me, logout. Every error is a JSON body with a code; a store that
  # cannot answer in time, or a login storm past the hashing pool, gets a
  # fast 503 with Retry-After instead of a pile-up.
  #
  # Every request keeps a deadline (`Grove.Gateway.Clock`): one that
  # arrives past it is answered 503 at once, and every wait after that is
  # bounded by what is left of it, less the time to write the answer.

  import Grove.Gateway.Records

  alias Grove.Accounts
  alias Grove.Gateway.{Clock, HTTP}
  alias Grove.Store.Account

  # Kept for encoding and writing the answer after the last wait.
  @answer_ms 10

  def out(arg, config) do
    method = http_request(arg(arg, :req), :method)
    path = arg(arg, :server_path)
    deadline = Clock.deadline(config)

    cond do
      config[:accounts] == nil ->
        HTTP.error(404, "not_found", "this server has no accounts")

      Clock.left(deadline) <= @answer_ms ->
        Clock.late(:arrival)
        busy(:unavailable)

      true ->
        route(method, path, arg, {config.accounts, deadline - @answer_ms})
    end
  end

  defp route(:POST, ~c"/api/device_login", arg, {accounts, deadline}) do
    with {:ok, body} <- json_body(arg),
         {:ok, device_id} <- field(body, "device_id", &is_binary/1),
         {:ok, token, account, how} <-
           Accounts.device_login(accounts, device_id, ip: ip(arg), deadline: deadline) do
      HTTP.json(if(how == :created, do: 201, else: 200), %{
        "token" => token,
        "account" => json(account),
        "created" => how == :created
      })
    else
      error -> failure(error)
    end
  end

  defp route(:POST, ~c"/api/register", arg, {accounts, deadline}) do
    with {:ok, body} <- json_body(arg),
         {:ok, name} <- field(body, "name", &is_binary/1),
         {:ok, password} <- field(body, "password", &is_binary/1),
         {:ok, avatar} <- optional(body, "avatar", &is_binary/1, nil),
         {:ok, token, account} <-
           Accounts.register(accounts, name, password,
             ip: ip(arg),
             avatar: avatar,
             deadline: deadline
           ) do
      HTTP.json(201, %{"token" => token, "account" => json(account)})
    else
      error -> failure(error)
    end
  end

  defp route(:POST, ~c"/api/login", arg, {accounts, deadline}) do
    with {:ok, body} <- json_body(arg),
         {:ok, name} <- field(body, "name", &is_binary/1),
         {:ok, password} <- field(body, "password", &is_binary/1),
         {:ok, token, account} <-
           Accounts.login(accounts, name, password, ip: ip(arg), deadline: deadline) do
      HTTP.json(200, %{"token" => token, "account" => json(account)})
    else
      error -> failure(error)
    end
  end

  defp route(:GET, ~c"/api/me", arg, service) do
    with {:ok, account, _token_id} <- authenticate(arg, service) do
      HTTP.json(200, %{"account" => json(account)})
    else
      error -> failure(error)
    end
  end

  defp route(:PATCH, ~c"/api/me", arg, {accounts, deadline} = service) do
    with {:ok, %Account{id: id}, _} <- authenticate(arg, service),
         {:ok, body} <- json_body(arg),
         {:ok, name} <- optional(body, "name", &is_binary/1, nil),
         {:ok, avatar} <- optional(body, "avatar", &is_binary/1, nil),
         changes = for({k, v} <- [name: name, avatar: avatar], v != nil, into: %{}, do: {k, v}),
         {:ok, account} <- Accounts.update(accounts, id, changes, deadline: deadline) do
      HTTP.json(200, %{"account" => json(account)})
    else
      error -> failure(error)
    end
  end

  defp route(:POST, ~c"/api/logout", arg, {accounts, deadline}) do
    with token when token != nil <- bearer(arg),
         :ok <- Accounts.logout(accounts, token, deadline: deadline) do
      HTTP.json(200, %{"ok" => true})
    else
      nil -> failure(:unauthorized)
      error -> failure(error)
    end
  end

  defp route(method, path, _arg, _service)
       when path in [
              ~c"/api/device_login",
              ~c"/api/register",
              ~c"/api/login",
              ~c"/api/me",
              ~c"/api/logout"
            ],
       do: HTTP.error(405, "method_not_allowed", "#{method} is not allowed here")

  defp route(_method, _path, _arg, _service),
    do: HTTP.error(404, "not_found", "no such endpoint")

  ## Helpers

  defp authenticate(arg, {accounts, deadline}) do
    case bearer(arg) do
      nil -> {:error, :unauthorized}
      token -> Accounts.authenticate(accounts, token, deadline: deadline)
    end
  end

  defp bearer(arg) do
    case headers(arg(arg, :headers), :authorization) do
      {_user, _password, ~c"Bearer " ++ token} -> to_string(token)
      _ -> nil
    end
  end

  defp json_body(arg) do
    with {:ok, body} <- HTTP.body(arg),
         {:ok, %{} = object} <- HTTP.decode_json(body) do
      {:ok, object}
    else
      {:ok, _not_an_object} -> {:error, 400, "bad_json", "the body must be a JSON object"}
      error -> error
    end
  end

  defp field(body, key, valid?) do
    case Map.fetch(body, key) do
      {:ok, value} ->
        if valid?.(value),
          do: {:ok, value},
          else: {:error, 400, "bad_field", "#{key} has the wrong type"}

      :error ->
        {:error, 400, "bad_field", "#{key} is missing"}
    end
  end

  defp optional(body, key, valid?, default) do
    case Map.fetch(body, key) do
      {:ok, nil} -> {:ok, default}
      {:ok, _} -> field(body, key, valid?)
      :error -> {:ok, default}
    end
  end

  defp ip(arg) do
    {ip, _port} = arg(arg, :client_ip_port)
    ip
  end

  defp json(%Account{} = account) do
    %{
      "id" => account.id,
      "name" => account.name || :null,
      "avatar" => account.avatar,
      "created_at" => account.created_at
    }
  end

  # Each failure has one status and one code, listed in docs/api.md. Bad
  # requests come already described; the accounts' refusals by reason.
  defp failure({:error, status, code, message}), do: HTTP.error(status, code, message)
  defp failure({:error, reason}), do: failure(reason)

  defp failure(:unauthorized),
    do: HTTP.error(401, "unauthorized", "send Authorization: Bearer TOKEN")

  defp failure(:invalid_token),
    do: HTTP.error(401, "invalid_token", "the token is not one this server issued")

  defp failure(:expired), do: HTTP.error(401, "expired", "the token has expired; log in again")
  defp failure(:revoked), do: HTTP.error(401, "revoked", "the token was logged out; log in again")

  defp failure(:invalid_credentials),
    do: HTTP.error(401, "invalid_credentials", "wrong name or password")

  defp failure(:invalid_name),
    do: HTTP.error(400, "invalid_name", "names are 3 to 24 letters, digits, _ . or -")

  defp failure(:weak_password),
    do: HTTP.error(400, "weak_password", "passwords are 8 to 128 bytes")

  defp failure(:invalid_device),
    do: HTTP.error(400, "invalid_device", "device ids are 8 to 128 printable characters")

  defp failure(:invalid_avatar), do: HTTP.error(400, "invalid_avatar", "an avatar is one emoji")
  defp failure(:name_taken), do: HTTP.error(409, "name_taken", "that name is taken")
  defp failure(:not_found), do: HTTP.error(404, "not_found", "no such account")

  defp failure(:rate_limited),
    do: [
      {:header, {~c"Retry-After", ~c"1"}}
      | HTTP.error(429, "rate_limited", "too many attempts; slow down")
    ]

  # No permit to hash in time, or no answer from the store in time.
  defp failure(:busy) do
    Clock.late(:password)
    busy(:busy)
  end

  defp failure(:unavailable) do
    Clock.late(:store)
    busy(:unavailable)
  end

  # Clients wait at least Retry-After, with jitter of their own (docs/api.md).
  defp busy(reason),
    do: [
      {:header, {~c"Retry-After", ~c"1"}}
      | HTTP.error(503, to_string(reason), "the server is busy; try again shortly")
    ]
end
